"""``TrioPortal``: asyncio (Ray's actor loop) calling into the actor's Trio thread."""

from __future__ import annotations

import asyncio
import threading

import pytest
import trio

from trio_agent.ray._portal import PortalClosed, TrioPortal


async def _double(value: int) -> int:
    await trio.lowlevel.checkpoint()
    return value * 2


async def _fail() -> None:
    await trio.lowlevel.checkpoint()
    raise KeyError("from trio")


def test_values_errors_and_sync_calls_cross_the_thread() -> None:
    portal = TrioPortal()

    async def main() -> None:
        assert await portal.call(_double, 21) == 42
        with pytest.raises(KeyError, match="from trio"):
            await portal.call(_fail)
        assert await portal.call_sync(threading.current_thread) is not threading.current_thread()
        assert await asyncio.gather(*(portal.call(_double, i) for i in range(100))) == [2 * i for i in range(100)]

    try:
        asyncio.run(main())
    finally:
        portal.close()


def test_a_cancelled_caller_waits_for_the_trio_task_to_clean_up() -> None:
    portal = TrioPortal()
    log: list[str] = []
    running = threading.Event()

    async def guarded() -> None:
        try:
            running.set()
            await trio.sleep_forever()
        finally:
            log.append("cancelled in trio")
            with trio.CancelScope(shield=True):
                await trio.sleep(0.2)  # cleanup that takes a while (a terminal event, a flush)
            log.append("cleaned up")

    async def main() -> None:
        call = asyncio.ensure_future(portal.call(guarded))
        await asyncio.get_running_loop().run_in_executor(None, running.wait)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        log.append("caller saw the cancellation")

    try:
        asyncio.run(main())
    finally:
        portal.close()
    assert log == ["cancelled in trio", "cleaned up", "caller saw the cancellation"]


def test_after_close_calls_are_refused() -> None:
    portal = TrioPortal()
    portal.close()
    portal.close()  # idempotent

    async def main() -> None:
        with pytest.raises(PortalClosed):
            await portal.call(_double, 1)

    asyncio.run(main())


def test_closing_cancels_calls_in_flight() -> None:
    portal = TrioPortal()
    running = threading.Event()

    async def forever() -> None:
        running.set()
        await trio.sleep_forever()

    async def main() -> None:
        call = asyncio.ensure_future(portal.call(forever))
        await asyncio.get_running_loop().run_in_executor(None, running.wait)
        portal.close()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(main())
