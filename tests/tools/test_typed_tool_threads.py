"""Sync tools run in worker threads (abandoned on cancel), raw sync handlers are decided
at registration, and an ``async`` tool that blocks the loop is reported (``tool.blocked``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._runtime._calls import _blocking
from trio_agent._tools import InvalidToolArguments
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm


def _context(messages: list[str]) -> ta.ToolContext:
    return ta.ToolContext("call-1", "t", Path("."), None, progress=messages.append)  # type: ignore[arg-type]


async def test_a_sync_typed_tool_runs_in_a_worker_thread_and_reports_from_it() -> None:
    seen: list[str] = []

    @ta.tool
    def add(ctx: ta.ToolContext, a: int, b: int) -> int:
        """Add two numbers."""
        seen.append(threading.current_thread().name)
        ctx.report("adding")
        return a + b

    messages: list[str] = []
    assert await add.handler(_context(messages), {"a": 2, "b": 3}) == 5  # type: ignore[arg-type]
    assert seen and seen[0] != threading.main_thread().name  # not the Trio thread
    assert messages == ["adding"]  # reported from the thread, delivered in Trio's
    with pytest.raises(InvalidToolArguments, match='a: expected an integer, got "2"'):
        await add.handler(_context(messages), {"a": "2", "b": 3})  # type: ignore[arg-type]


async def test_a_raw_sync_handler_is_decided_at_registration_and_runs_in_a_thread() -> None:
    threads: list[str] = []

    def lookup(ctx: ta.ToolContext, args: dict[str, Any]) -> str:
        threads.append(threading.current_thread().name)
        return f"found {args['key']}"

    async def native(ctx: ta.ToolContext, args: dict[str, Any]) -> str:
        return "native"

    tools = ta.Tools.empty().function("lookup", "Look up.", {"type": "object"}, lookup)
    tools.function("native", "Native.", {"type": "object"}, native)
    tools.custom("echo", "Echo.", lambda ctx, text: trio.to_thread.run_sync(str.upper, text))
    spec, native_spec, echo = tools.user_tool("lookup"), tools.user_tool("native"), tools.user_tool("echo")
    assert spec is not None and native_spec is not None and echo is not None
    registered: object = spec.handler
    assert registered is not lookup  # wrapped once, when registered
    assert native_spec.handler is native  # an async handler is kept as it is
    assert await spec.handler(_context([]), {"key": "k"}) == "found k"  # type: ignore[arg-type]
    assert threads and threads[0] != threading.main_thread().name
    # A lambda that returns an awaitable: its result is awaited in the turn's task.
    assert await echo.handler(_context([]), "hi") == "HI"  # type: ignore[arg-type]
    with pytest.raises(ta.ConfigError, match="handler must be a callable handler"):
        ta.Tools.empty().function("x", "X.", {"type": "object"}, "not callable")  # type: ignore[arg-type]


async def test_a_cancelled_turn_abandons_a_sync_tool_at_once(server: FakeResponsesServer, workspace: Path) -> None:
    """Cancel returns while the thread is still blocked (without ``abandon_on_cancel`` the
    cancel waits for the thread, 20 s, and ``finished`` is no longer empty); the
    thread's late result is discarded."""
    started = threading.Event()
    release = threading.Event()
    finished: list[str] = []

    @ta.tool
    def slow(n: int) -> str:
        """Block."""
        started.set()
        release.wait(timeout=20)  # bounded, so that a cancel which waits for it fails (below) rather than hangs
        finished.append(f"done {n}")
        return "late result"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-call", [frames.function_call("call-slow", "slow", json.dumps({"n": 1}))])
        second = await server.accept()
        after = await second.next_request()
        assert "late result" not in json.dumps(after)
        await second.send_final("resp-after")

    tools = ta.Tools.default().add(slow)
    async with scripted(script), ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        turn = await agent.prompt("go")
        await trio.to_thread.run_sync(started.wait)
        await turn.cancel()
        with pytest.raises(ta.TurnCancelled):
            await turn.result()
        assert finished == []  # the thread is still blocked: the cancel did not wait for it
        release.set()
        assert (await (await agent.prompt("after")).result()).final_message == "done"


async def test_an_async_tool_that_blocks_the_loop_is_reported_once(
    server: FakeResponsesServer, workspace: Path
) -> None:
    @ta.tool
    async def stall(ms: int) -> str:
        """Block the loop (the mistake this warns about)."""
        await trio.lowlevel.checkpoint()
        time.sleep(ms / 1000)  # blocks the event loop, on purpose
        await trio.lowlevel.checkpoint()
        time.sleep(ms / 1000)  # a second long step: still one event
        return "stalled"

    @ta.tool
    async def polite(ms: int) -> str:
        """Await instead."""
        await trio.to_thread.run_sync(time.sleep, ms / 1000)
        return "waited"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-calls", [
            frames.function_call("call-stall", "stall", json.dumps({"ms": 300})),
            frames.function_call("call-polite", "polite", json.dumps({"ms": 300})),
        ])
        await conn.next_request()
        await conn.send_final("resp-final")

    # 250 ms: well above what a loaded machine's scheduler may steal from one step of `polite`
    tools = ta.Tools.default().add(stall).add(polite).with_blocking_warning(0.25)
    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("go")).result()
    blocked = log.of(ta.EventKind.TOOL_BLOCKED)
    assert [(e.payload["call_id"], e.payload["tool"], e.payload["threshold_ms"]) for e in blocked] == [
        ("call-stall", "stall", 250.0)
    ]
    blocked_ms = blocked[0].payload["blocked_ms"]
    assert isinstance(blocked_ms, float) and blocked_ms >= 300
    kinds = [(e.kind, e.payload.get("call_id")) for e in log.events]
    blocked_at = kinds.index((ta.EventKind.TOOL_BLOCKED, "call-stall"))
    assert blocked_at < kinds.index((ta.EventKind.TOOL_RESULT, "call-stall"))


@pytest.mark.parametrize("explicit", [False, True], ids=["default", "set"])
async def test_under_a_virtual_clock_the_default_check_is_off(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock, explicit: bool
) -> None:
    """A deterministic test's events do not depend on the machine's load: under MockClock
    only an explicitly set threshold watches (the default one would report this stall)."""

    @ta.tool
    async def stall() -> str:
        """Block the loop."""
        time.sleep(0.15)  # longer than the 100 ms default, on purpose
        return "stalled"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-call", [frames.function_call("call-stall", "stall", "{}")])
        await conn.next_request()
        await conn.send_final("resp-final")

    tools = ta.Tools.default().add(stall)
    assert tools.blocking_threshold == 0.1 and not tools.blocking_threshold_set
    if explicit:
        tools.with_blocking_warning(0.1)
    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("go")).result()
    assert [e.payload["call_id"] for e in log.of(ta.EventKind.TOOL_BLOCKED)] == (["call-stall"] if explicit else [])


async def test_a_tool_that_blocks_in_its_only_step_is_reported_when_it_returns() -> None:
    reports: list[float] = []

    async def one_step() -> None:
        with _blocking.watch_blocking(0.01, reports.append):
            time.sleep(0.03)  # the whole call is one step: no after_task_step sees it

    await one_step()
    assert len(reports) == 1 and reports[0] >= 0.03


async def test_the_instrument_is_installed_only_while_a_watched_call_runs() -> None:
    reports: list[float] = []
    monitor: Any = None
    with _blocking.watch_blocking(10.0, reports.append):
        monitor = _blocking._MONITOR.get()
        assert monitor.watches
        with _blocking.watch_blocking(None, reports.append):  # off: no watch at all
            await trio.lowlevel.checkpoint()
    assert not monitor.watches
    with pytest.raises(KeyError):  # already removed: nothing runs per task step now
        trio.lowlevel.remove_instrument(monitor)
    assert reports == []


def test_the_threshold_is_checked() -> None:
    tools = ta.Tools.empty()
    assert tools.blocking_threshold == 0.1
    assert tools.with_blocking_warning(None).blocking_threshold is None
    assert tools.with_blocking_warning(2).blocking_threshold == 2.0
    for bad in (0, -1, True, "1", 1e9):
        with pytest.raises(ta.ConfigError, match="blocking threshold"):
            tools.with_blocking_warning(bad)  # type: ignore[arg-type]


async def test_an_abandoned_thread_reports_nothing_and_raises_nothing() -> None:
    started, release, done = threading.Event(), threading.Event(), threading.Event()
    outcome: list[str] = []

    @ta.tool
    def late(ctx: ta.ToolContext, n: int) -> int:
        """Report after the call was abandoned."""
        started.set()
        release.wait(timeout=20)
        try:
            ctx.report("too late")
            outcome.append("dropped quietly")
        except BaseException as exc:  # the thread must not see the call's end as an error
            outcome.append(repr(exc))
        done.set()
        return n

    messages: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(late.handler, _context(messages), {"n": 1})  # type: ignore[arg-type]
        await trio.to_thread.run_sync(started.wait)
        nursery.cancel_scope.cancel()  # the call returns at once; the thread runs on
    release.set()
    await trio.to_thread.run_sync(done.wait)
    assert outcome == ["dropped quietly"] and messages == []
