"""Span timestamps from Trio's clock.

All time in the runtime is Trio time (``trio.current_time()``, virtual under
``MockClock``); OpenTelemetry wants nanoseconds since the Unix epoch. One anchor per
``trio.run`` (a ``RunVar``: the wall clock read once, with the Trio time at that
moment) maps the one onto the other, so every agent of a run agrees and a span lasts
exactly as long as its Trio duration. A tracer, which lives in one run, takes the
mapping once (``clock``) instead of looking the anchor up for every timestamp.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

__all__ = ["clock", "epoch_ns"]

_ANCHOR: trio.lowlevel.RunVar[tuple[int, float]] = trio.lowlevel.RunVar("trio_agent_tracing_anchor")


def epoch_ns(trio_time: float) -> int:
    """``trio_time`` (seconds on this run's clock) as Unix-epoch nanoseconds."""
    wall, base = _anchor()
    return wall + round((trio_time - base) * 1e9)


def clock() -> Callable[[float], int]:
    """``epoch_ns`` for the run this is called in, with its anchor bound."""
    wall, base = _anchor()

    def to_epoch_ns(trio_time: float) -> int:
        return wall + round((trio_time - base) * 1e9)

    return to_epoch_ns


def _anchor() -> tuple[int, float]:
    try:
        wall, base = _ANCHOR.get()
    except LookupError:
        # The one wall-clock read: exported spans need epoch times (DESIGN: "All time
        # goes through Trio" -- durations do; this only places them on the calendar).
        wall, base = time.time_ns(), trio.current_time()
        _ANCHOR.set((wall, base))
    return wall, base
