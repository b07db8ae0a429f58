"""Real processes under ``trio.testing.MockClock(autojump_threshold=0)``.

An autojumping mock clock jumps to the next deadline the moment every task waits, and
a task waiting on a real process (its pipe, its exit) is waiting. Without care, a test
that runs real commands under the mock clock sees every command "still running" at
its yield deadline, and kill graces expire before a signalled process could exit.

So while a real process started by a tool is alive, ``real_process_running()`` raises
an autojumping clock's threshold to ``CUSHION`` seconds of *real* time: Trio's clock
still jumps, but only after nothing happened for that long. A command that finishes
within that is seen finished, with its output, at the virtual time it started; one
that runs longer yields at its virtual yield deadline, as it would on the real clock.
The threshold goes back to what it was when the last such process is gone (unless the
test changed it meanwhile). Real clocks, and mock clocks whose threshold is already at
least ``CUSHION`` (or infinite: no autojump), are left alone.

The cushion trades wall time for fidelity: a silent command costs the test up to
``CUSHION`` seconds per wait. Tests that need exact virtual times should not run real
commands at all (script a tool instead).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import trio

__all__ = ["CUSHION", "real_process_running"]

CUSHION = 1.0


@attrs.define
class _Hold:
    count: int
    original: float


_holds: dict[int, _Hold] = {}  # by id() of the run's clock; one clock per trio.run


@contextmanager
def real_process_running() -> Iterator[None]:
    clock = trio.lowlevel.current_clock()
    threshold = getattr(clock, "autojump_threshold", None)
    key = id(clock)
    hold = _holds.get(key)
    if hold is None:
        if not isinstance(threshold, float | int) or threshold >= CUSHION:
            yield
            return
        hold = _holds[key] = _Hold(0, float(threshold))
        clock.autojump_threshold = CUSHION  # type: ignore[attr-defined]
    hold.count += 1
    try:
        yield
    finally:
        hold.count -= 1
        if hold.count == 0:
            del _holds[key]
            if getattr(clock, "autojump_threshold", None) == CUSHION:
                clock.autojump_threshold = hold.original  # type: ignore[attr-defined]
