"""Notice an ``async`` user tool that blocks the event loop (``tool.blocked``).

A Trio instrument times the steps of the task that runs a user tool's handler: a step
is the stretch between two of its awaits, during which nothing else in the process
runs, so one longer than the threshold (``Tools.with_blocking_warning``) is a
``time.sleep``, a blocking socket or heavy computation on the loop. The first such step
of a call is reported once, soon after the step ends (through ``run_sync_soon``, since
an instrument runs between tasks) and at the latest when the call ends, so before the
call's result.

Why an instrument and not a watchdog task: it times the tool's own task exactly (a
watchdog sees any task's stall and blames the tool), needs no timer or thread, and is
installed only while at least one watched call runs (and, unless the threshold was set
explicitly, not at all under a virtual clock such as ``MockClock``: see
``Tools.with_blocking_warning``); with no user tool running, the
scheduler calls no hook at all, so no per-frame cost is added. While a call runs, each
task step of the process pays a dict lookup.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import trio

__all__ = ["watch_blocking"]


class _Watch:
    __slots__ = ("pending", "previous", "report", "reported", "step_started", "threshold")

    def __init__(self, threshold: float, report: Callable[[float], None], previous: _Watch | None) -> None:
        self.threshold = threshold
        self.report = report
        self.previous = previous  # a watch of the same task this one nests in (restored after)
        self.reported = False
        self.pending: float | None = None  # found by the instrument, not yet reported
        self.step_started = time.perf_counter()  # the step that opens the watch counts too

    def check(self, now: float) -> float | None:
        """The step's length, if it is the first to pass the threshold."""
        elapsed = now - self.step_started
        if self.reported or elapsed <= self.threshold:
            return None
        self.reported = True
        return elapsed

    def flush(self) -> None:
        """Report what the instrument found (once: from ``run_sync_soon`` or at the
        call's end, whichever comes first, so it always precedes the call's result)."""
        elapsed, self.pending = self.pending, None
        if elapsed is not None:
            self.report(elapsed)


class _Monitor(trio.abc.Instrument):
    """The run's instrument (one per Trio run, through ``_MONITOR``)."""

    def __init__(self) -> None:
        self.watches: dict[trio.lowlevel.Task, _Watch] = {}
        self._token = trio.lowlevel.current_trio_token()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        watch = self.watches.get(task)
        if watch is not None:
            watch.step_started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        watch = self.watches.get(task)
        if watch is not None:
            elapsed = watch.check(time.perf_counter())
            if elapsed is not None:
                watch.pending = elapsed
                self._token.run_sync_soon(watch.flush)


_MONITOR: trio.lowlevel.RunVar[_Monitor] = trio.lowlevel.RunVar("trio_agent_blocking_monitor")


@contextmanager
def watch_blocking(threshold: float | None, report: Callable[[float], None]) -> Iterator[None]:
    """Watch the current task while the block runs: ``report(seconds)`` once, for its
    first step longer than ``threshold`` seconds (None: no watch)."""
    if threshold is None:
        yield
        return
    try:
        monitor = _MONITOR.get()
    except LookupError:
        monitor = _Monitor()
        _MONITOR.set(monitor)
    task = trio.lowlevel.current_task()
    if not monitor.watches:
        trio.lowlevel.add_instrument(monitor)
    watch = _Watch(threshold, report, monitor.watches.get(task))
    monitor.watches[task] = watch
    try:
        yield
    finally:
        watch.flush()
        elapsed = watch.check(time.perf_counter())  # a last step the instrument did not see end
        if watch.previous is not None:
            monitor.watches[task] = watch.previous
            watch.previous.step_started = time.perf_counter()
        else:
            del monitor.watches[task]
            if not monitor.watches:
                with contextlib.suppress(KeyError):  # Trio drops an instrument that raised
                    trio.lowlevel.remove_instrument(monitor)
        if elapsed is not None:
            report(elapsed)
