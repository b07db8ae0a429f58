"""``QuickLock`` (the model's attempt lock and the socket's send locks): one holder at a
time, waiters served in arrival order, a cancelled waiter gone from the queue."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_agent._transport._quick_lock import QuickLock


async def test_an_uncontended_lock_is_taken_and_given_back_without_a_schedule_point() -> None:
    lock = QuickLock()
    lock.acquire_nowait()
    assert lock.locked()
    with pytest.raises(trio.WouldBlock):
        lock.acquire_nowait()
    lock.release()
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()


async def test_waiters_get_the_lock_in_arrival_order_handed_over_by_release() -> None:
    lock = QuickLock()
    order: list[int] = []

    async def waiter(i: int) -> None:
        async with lock:
            order.append(i)
            await trio.lowlevel.checkpoint()  # hold it across a schedule point

    lock.acquire_nowait()
    async with trio.open_nursery() as nursery:
        for i in range(4):
            nursery.start_soon(waiter, i)
            await trio.testing.wait_all_tasks_blocked()  # each parks before the next starts
        lock.release()  # handed to waiter 0: nobody can slip in between
        with pytest.raises(trio.WouldBlock):
            lock.acquire_nowait()
    assert order == [0, 1, 2, 3]
    assert not lock.locked()


async def test_a_cancelled_waiter_leaves_the_queue_and_never_holds_the_lock() -> None:
    lock = QuickLock()
    got: list[str] = []

    async def waiter(name: str, scope: trio.CancelScope) -> None:
        with scope:
            async with lock:
                got.append(name)

    lock.acquire_nowait()
    first, second = trio.CancelScope(), trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "first", first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(waiter, "second", second)
        await trio.testing.wait_all_tasks_blocked()
        first.cancel()
        await trio.testing.wait_all_tasks_blocked()
        lock.release()
    assert got == ["second"]
    assert not lock.locked()


async def test_acquire_is_a_cancel_point_even_when_the_lock_is_free() -> None:
    lock = QuickLock()
    with trio.CancelScope() as scope:
        scope.cancel()
        await lock.acquire()
    assert scope.cancelled_caught
    assert not lock.locked()
