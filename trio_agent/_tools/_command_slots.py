"""The cap on live ``exec_command`` processes: slots, waiting for one, and its bound.

A command takes a slot *before* it is spawned and gives it back only once its whole
process tree is gone, so no burst of concurrent calls can exceed the cap (issue 8
item 6: checking a count and spawning later let 200 calls through a cap of 64). Only
running commands hold slots: one that finished -- within its yield time or later, read
or not -- holds none.

When no slot is free, a call first tries ``make_room`` (``exec_command`` evicts the
least recently used background session outside the most recent ones, as nanocodex
does), then waits for a slot in FIFO order. The wait is cancellable and bounded by
``patience`` (the call's yield time plus :data:`SLOT_WAIT_LIMIT`); past that the call
fails with a :class:`ShellError` that says what to do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import final

import trio

from ._shell_env import ShellError

__all__ = ["SLOT_WAIT_LIMIT", "CommandSlots"]

#: Seconds a call beyond the cap waits for a slot, on top of its own yield time.
SLOT_WAIT_LIMIT = 30.0


@final
class CommandSlots:
    """``limit`` slots; :meth:`acquire` takes one, :meth:`release` gives it back."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"max_sessions must be at least 1, got {limit}")
        self.limit = limit
        self._semaphore = trio.Semaphore(limit)
        self._waiting = 0

    @property
    def running(self) -> int:
        """Slots held (commands whose process tree is not gone yet)."""
        return self.limit - self._semaphore.value

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return self._waiting

    async def acquire(self, patience: float, make_room: Callable[[], Awaitable[bool]]) -> None:
        """Take a slot, waiting at most ``patience`` seconds (cancellable).

        ``make_room()`` is awaited while no slot is free and it says it freed one; a slot
        it frees may go to a call that was already waiting (first come, first served).

        Raises:
          ShellError: no slot became free within ``patience``.
        """
        while True:
            try:
                self._semaphore.acquire_nowait()
            except trio.WouldBlock:
                if await make_room():
                    continue
                break
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()  # a cancel here would leak the slot
                return
        self._waiting += 1
        try:
            with trio.move_on_after(patience):
                await self._semaphore.acquire()
                return
        finally:
            self._waiting -= 1
        raise ShellError(
            f"too many running commands: no slot of {self.limit} became free within {patience:g} s; "
            "wait for a running session to finish (write_stdin with empty chars) or interrupt "
            'one (chars "\\u0003"), then start this command again'
        )

    def release(self) -> None:
        self._semaphore.release()
