"""Wall-clock timestamps for the wire that advance with Trio's clock.

The protocol carries Unix times (``createdAt`` seconds, ``startedAtMs``...). They are
read once from the system clock when the server starts and advanced by Trio's clock
from then on, so under ``trio.testing.MockClock`` every timestamp and ``durationMs`` is
exact, and no server code reads ``time.time()`` twice.
"""

from __future__ import annotations

import time

import trio

__all__ = ["WireClock"]


class WireClock:
    """Made inside the server's Trio run (its clock is the run's, bound once: ``trio.
    current_time()`` is three calls deep, and the server stamps most notifications)."""

    def __init__(self) -> None:
        self._wall = time.time()
        self._time = trio.lowlevel.current_clock().current_time
        self._start = self._time()

    def now_ms(self) -> int:
        return int((self._wall + self._time() - self._start) * 1000)

    def now_s(self) -> int:
        return self.now_ms() // 1000
