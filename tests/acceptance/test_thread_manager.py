"""The thread manager as a library (SPEC sec. 11; codex.md 7.2-7.4), on the in-memory
seam under ``MockClock(autojump_threshold=0)``: every unload happens at an exact time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer

Reply = Callable[[FakeConnection, dict[str, Any]], Awaitable[None]]


async def answer_done(conn: FakeConnection, request: dict[str, Any]) -> None:
    await conn.send_final(f"resp-{len(conn.requests)}", "Done")


class Model:
    """Answers every connection: warmups, then each request with ``reply``."""

    def __init__(self, server: FakeResponsesServer, reply: Reply = answer_done) -> None:
        self.server = server
        self.reply = reply

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                try:
                    conn = await self.server.accept()
                except trio.BrokenResourceError:  # an agent closed while connecting
                    continue
                nursery.start_soon(self._connection, conn)

    async def _connection(self, conn: FakeConnection) -> None:
        try:
            while True:
                request = await conn.next_request()
                if request.get("generate") is False:
                    await conn.send_warmup("resp-warmup")
                else:
                    await self.reply(conn, request)
        except Exception:  # the agent closed this socket
            return


class ThreadLog(list[ta.ThreadEvent]):
    """The manager's events, with a way to wait for one."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = trio.Event()

    async def consume(self, events: ta.ThreadEvents) -> None:
        async for event in events:
            self.append(event)
            self._changed.set()
            self._changed = trio.Event()

    async def wait_closed(self, thread_id: str) -> float:
        """Trio time at which ``thread_id``'s ``thread.closed`` arrived (or now, if it has)."""
        while not any(e.kind == "thread.closed" and e.thread_id == thread_id for e in self):
            await self._changed.wait()
        return trio.current_time()


@asynccontextmanager
async def manager(tmp_path: Path, reply: Reply = answer_done, unload_delay: float = 2.0
                  ) -> AsyncIterator[tuple[ta.ThreadManager, ThreadLog]]:
    server = FakeResponsesServer.in_memory()
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    config = ta.AgentConfig(auth="k", workspace=workspace, thinking=ta.Thinking.LOW,
                            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                   websocket_url=server.url, dialer=server.dial))
    seen = ThreadLog()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        nursery.start_soon(Model(server, reply).serve)
        async with ta.open_thread_manager(tmp_path / "home", config=config, unload_delay=unload_delay) as threads:
            nursery.start_soon(seen.consume, threads.events)
            yield threads, seen
        nursery.cancel_scope.cancel()


async def test_unsubscribe_keeps_a_thread_loaded_until_the_idle_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with manager(tmp_path, unload_delay=2.0) as (threads, seen):
        agent = await threads.start(subscriber="client")
        thread_id = agent.session_id
        await (await agent.prompt("hello")).result()
        assert threads.status(thread_id) is ta.ThreadStatus.IDLE
        left = trio.current_time()
        assert threads.unsubscribe(thread_id, "client") is ta.UnsubscribeStatus.UNSUBSCRIBED
        assert threads.unsubscribe(thread_id, "client") is ta.UnsubscribeStatus.NOT_SUBSCRIBED
        await trio.sleep(1.0)
        assert threads.loaded() == [thread_id]
        # Resuming (warm) subscribes, which cancels the pending unload even past its deadline.
        assert await threads.resume(thread_id, subscriber="client") is agent
        await trio.sleep(5.0)
        assert threads.loaded() == [thread_id]
        assert threads.unsubscribe(thread_id, "client") is ta.UnsubscribeStatus.UNSUBSCRIBED
        left = trio.current_time()
        closed = await seen.wait_closed(thread_id)
        assert closed - left == pytest.approx(2.0, abs=1e-9)  # a fresh countdown from the last unsubscribe
        assert threads.loaded() == []
        assert threads.status(thread_id) is ta.ThreadStatus.NOT_LOADED
        assert threads.unsubscribe(thread_id, "client") is ta.UnsubscribeStatus.NOT_LOADED
        statuses = [e.status for e in seen if e.thread_id == thread_id and e.kind == "thread.status"]
        assert statuses[-1] is ta.ThreadStatus.NOT_LOADED
        assert [e.kind for e in seen if e.kind in ("thread.status", "thread.closed")][-2:] == [
            "thread.status", "thread.closed"]  # NOT_LOADED, then closed
        resumed = await threads.resume(thread_id, subscriber="client")  # cold, from the rollout
        assert resumed is not agent
        assert threads.status(thread_id) is ta.ThreadStatus.IDLE
        texts = [p.get("text") for item in threads.read(thread_id).history for p in item.get("content") or []]
        assert "hello" in texts and "Done" in texts


async def test_a_subscribed_idle_thread_never_unloads_even_with_delay_zero(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with manager(tmp_path, unload_delay=0.0) as (threads, seen):
        agent = await threads.start(subscriber="client")
        await trio.sleep(3600)
        assert threads.loaded() == [agent.session_id]
        threads.unsubscribe(agent.session_id, "client")
        left = trio.current_time()
        assert await seen.wait_closed(agent.session_id) == pytest.approx(left, abs=1e-9)


async def test_a_running_turn_keeps_the_thread_loaded(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    release = trio.Event()

    async def held(conn: FakeConnection, request: dict[str, Any]) -> None:
        await release.wait()
        await answer_done(conn, request)

    async with manager(tmp_path, held, unload_delay=0.0) as (threads, seen):
        agent = await threads.start(subscriber="client")
        turn = await agent.prompt("long job")
        await turn.wait_running()
        assert threads.status(agent.session_id) is ta.ThreadStatus.ACTIVE
        threads.unsubscribe(agent.session_id, "client")
        await trio.sleep(1200)
        assert threads.loaded() == [agent.session_id]  # the turn keeps it
        release.set()
        assert (await turn.result()).final_message == "Done"
        done = trio.current_time()
        assert await seen.wait_closed(agent.session_id) == pytest.approx(done, abs=1e-9)


async def test_a_failed_turn_leaves_system_error_until_the_next_turn_starts(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    failed = False

    async def fail_once(conn: FakeConnection, request: dict[str, Any]) -> None:
        nonlocal failed
        if not failed:
            failed = True
            await conn.send({"type": "response.failed", "response": {"id": "resp-1", "error": {
                "code": "invalid_request_error", "message": "simulated failure"}}})
        else:
            await answer_done(conn, request)

    async with manager(tmp_path, fail_once) as (threads, _seen):
        agent = await threads.start(subscriber="client")
        thread_id = agent.session_id
        with pytest.raises(ta.TurnFailed):
            await (await agent.prompt("fail this turn")).result()
        await trio.testing.wait_all_tasks_blocked()
        assert threads.status(thread_id) is ta.ThreadStatus.SYSTEM_ERROR
        threads.unsubscribe(thread_id, "client")
        await trio.sleep(1.0)
        assert await threads.resume(thread_id, subscriber="client") is agent
        assert threads.status(thread_id) is ta.ThreadStatus.SYSTEM_ERROR  # across unsubscribe and resume
        turn = await agent.prompt("again")
        await turn.wait_running()
        assert threads.status(thread_id) is ta.ThreadStatus.ACTIVE
        await turn.result()
        await trio.testing.wait_all_tasks_blocked()
        assert threads.status(thread_id) is ta.ThreadStatus.IDLE


async def test_ephemeral_threads_keep_no_rollout_and_cannot_be_resumed_once_unloaded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with manager(tmp_path) as (threads, seen):
        agent = await threads.start(ephemeral=True, unload_delay=1.0, subscriber="client")
        await (await agent.prompt("hello")).result()
        assert agent.rollout is None
        threads.unsubscribe(agent.session_id, "client")
        left = trio.current_time()
        assert await seen.wait_closed(agent.session_id) - left == pytest.approx(1.0, abs=1e-9)  # its own delay
        with pytest.raises(ta.ThreadError, match="cannot resume an unloaded ephemeral thread"):
            await threads.resume(agent.session_id)
    assert not (tmp_path / "home" / "sessions").exists()


async def test_closing_the_manager_cancels_running_turns_with_their_terminal_events(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def never(conn: FakeConnection, request: dict[str, Any]) -> None:
        await trio.sleep_forever()

    turns: list[ta.Turn] = []
    async with manager(tmp_path, never) as (threads, seen):
        agent = await threads.start(subscriber="client")
        turns.append(await agent.prompt("forever"))
        await turns[0].wait_running()
    with pytest.raises(ta.TurnCancelled):
        await turns[0].result()
    terminals = [e.event for e in seen if e.event is not None and e.event.kind.is_terminal]
    assert [t.payload["status"] for t in terminals] == ["cancelled"]


async def test_unknown_threads_are_thread_errors(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with manager(tmp_path) as (threads, _):
        with pytest.raises(ta.ThreadError, match="cannot resume an unloaded thread"):
            await threads.resume("01a23200-0000-7000-8000-000000000000")
        assert threads.unsubscribe("nope", "client") is ta.UnsubscribeStatus.NOT_LOADED
        assert threads.subscribe("nope", "client") is False


async def test_a_recording_config_cannot_be_the_template_of_many_threads(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    config = ta.AgentConfig(auth="test", workspace=workspace, record=tmp_path / "session.jsonl")
    with pytest.raises(ta.ConfigError, match="each would overwrite the same cassette"):
        async with ta.open_thread_manager(tmp_path / "home", config=config):
            pass  # pragma: no cover
    assert not (tmp_path / "session.jsonl").exists()


async def unloaded_thread(threads: ta.ThreadManager, seen: ThreadLog) -> str:
    """A durable thread that ran one turn and was unloaded (delay 0)."""
    agent = await threads.start(subscriber="a")
    await (await agent.prompt("hello")).result()
    threads.unsubscribe(agent.session_id, "a")
    await seen.wait_closed(agent.session_id)
    return agent.session_id


def slow_startups(monkeypatch: pytest.MonkeyPatch, *, fail_first: bool = False) -> list[float]:
    """Every agent load takes 1 s (the first fails then, with ``fail_first``); the
    times the loads began."""
    from trio_agent._runtime._agent import Agent

    startup = Agent._startup
    began: list[float] = []

    async def slow(agent: Agent) -> None:
        began.append(trio.current_time())
        await trio.sleep(1)
        if fail_first and len(began) == 1:
            raise ta.ConfigError("this load fails")
        await startup(agent)

    monkeypatch.setattr(Agent, "_startup", slow)
    return began


async def test_concurrent_cold_resumes_share_one_load(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with manager(tmp_path, unload_delay=0.0) as (threads, seen):
        thread_id = await unloaded_thread(threads, seen)
        began = slow_startups(monkeypatch)
        resumed: dict[str, ta.Agent] = {}

        async def resume(subscriber: str) -> None:
            resumed[subscriber] = await threads.resume(thread_id, subscriber=subscriber)

        async with trio.open_nursery() as nursery:  # the second while the first is loading
            nursery.start_soon(resume, "a")
            nursery.start_soon(resume, "b")
        assert resumed["a"] is resumed["b"]
        assert began == [0.0]  # one load, shared
        assert threads.loaded() == [thread_id]
        # Both are subscribed: one leaving keeps the thread (delay 0), the other's leaving unloads it.
        threads.unsubscribe(thread_id, "a")
        await trio.sleep(10)
        assert threads.loaded() == [thread_id]
        threads.unsubscribe(thread_id, "b")
        await trio.testing.wait_all_tasks_blocked()
        assert threads.loaded() == []
        assert len([e for e in seen if e.kind == "thread.closed"]) == 2  # the first unload, and this one


async def test_a_resume_waiting_on_a_failed_load_loads_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with manager(tmp_path, unload_delay=0.0) as (threads, seen):
        thread_id = await unloaded_thread(threads, seen)
        began = slow_startups(monkeypatch, fail_first=True)
        outcomes: dict[str, object] = {}

        async def resume(name: str) -> None:
            try:
                outcomes[name] = await threads.resume(thread_id, subscriber=name)
            except ta.ConfigError as exc:  # not wrapped in exception groups
                outcomes[name] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(resume, "first")
            nursery.start_soon(resume, "second")
        # Whichever came second waited for the first load, which failed, then loaded it itself.
        assert began == [0.0, 1.0]
        assert sorted(type(outcome).__name__ for outcome in outcomes.values()) == ["Agent", "ConfigError"]
        assert threads.loaded() == [thread_id]
