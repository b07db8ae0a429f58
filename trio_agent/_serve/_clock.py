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
    def __init__(self) -> None:
        self._wall = time.time()
        self._start = trio.current_time()

    def now_ms(self) -> int:
        return int((self._wall + trio.current_time() - self._start) * 1000)

    def now_s(self) -> int:
        return self.now_ms() // 1000
