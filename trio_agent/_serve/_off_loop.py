"""Blocking work off the event loop, cancellable: ``off_loop(fn, interrupt)`` (every
SQLite call of the thread index, ``_thread_index``).

*Cancellation.* ``fn`` runs in ``trio.to_thread.run_sync``. A worker thread cannot be
killed: a cancelled wait calls ``interrupt`` (for SQLite, the connection's
``interrupt``, which stops its running statement) and waits, shielded, for the thread
to return, so no thread outlives the call that started it.

*Virtual time.* Under ``trio.testing.MockClock`` with autojump a task waiting for a
thread looks idle, and virtual time would leap to the next deadline while the disk
works; there the wait polls with checkpoints instead, so virtual time stands still.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import outcome
import trio

__all__ = ["off_loop"]

T = TypeVar("T")


async def off_loop(fn: Callable[[], T], interrupt: Callable[[], None] | None = None) -> T:
    """``fn()`` in a worker thread by ``trio.to_thread`` (see the module docstring)."""
    done = trio.Event()
    result: list[outcome.Outcome[T]] = []

    async def work() -> None:
        with trio.CancelScope(shield=True):  # the thread runs on: its result is waited for
            result.append(await outcome.acapture(trio.to_thread.run_sync, fn))
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(work)
        try:
            await _wait(done)
        except trio.Cancelled:
            if interrupt is not None:
                interrupt()
            with trio.CancelScope(shield=True):
                await _wait(done)
            raise
    return result[0].unwrap()


async def _wait(done: trio.Event) -> None:
    if math.isfinite(getattr(trio.lowlevel.current_clock(), "autojump_threshold", math.inf)):
        while not done.is_set():  # a poll on purpose (module docstring, "Virtual time")
            await trio.lowlevel.checkpoint()
    else:
        await done.wait()
