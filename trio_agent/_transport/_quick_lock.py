"""``QuickLock``: the lock every request takes (the model's attempt slot, the socket's
send), without ``trio.Lock``'s per-acquire bookkeeping. Imports only Trio: both
transports' paths use it."""

from __future__ import annotations

import trio

__all__ = ["QuickLock"]


class QuickLock:
    """A FIFO lock for one task at a time, taken and released without ``trio.Lock``'s
    bookkeeping (each uncontended acquire/release pair looks up the current task twice,
    registers and removes a parking-lot breaker and inspects the coroutine: ~3 us, and
    every request takes three locks). Contended, waiters park in arrival order and
    ``release`` hands the lock to the first of them, as ``trio.Lock`` does; a waiter
    cancelled before it is handed the lock leaves the queue. It does not check that the
    releasing task is the holder: its users release in the ``finally`` of the task that
    acquired it (the model's attempt slot, the socket's send)."""

    __slots__ = ("_held", "_lot")

    def __init__(self) -> None:
        self._held = False
        self._lot = trio.lowlevel.ParkingLot()

    def locked(self) -> bool:
        return self._held

    def acquire_nowait(self) -> None:
        if self._held:
            raise trio.WouldBlock
        self._held = True

    async def acquire(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._held:
            self._held = True
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        await self._lot.park()  # ``release`` hands it over: ``_held`` stays True

    def release(self) -> None:
        if not self._held:
            raise RuntimeError("release of a QuickLock that is not held")
        if self._lot:
            self._lot.unpark()  # the first waiter holds it now
        else:
            self._held = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
