"""The actor's Trio side (``AgentHost``) on its own, without Ray: the poll protocol,
cancellation before and during a run, and what a task's outcome is made of."""

from __future__ import annotations

import collections
import ssl
from pathlib import Path

import pytest
import ray.cloudpickle
import trio
import trio.testing

import trio_agent as ta
from trio_agent.ray import AgentTask, TaskCancelled, TaskCrashed, TaskStatus
from trio_agent.ray._host import AgentHost
from trio_agent.ray._running import travelling, with_tls
from trio_agent.ray._values import EventBatch, PollReply, TaskResult
from trio_agent.testing import FakeResponsesServer

from .._os_facts import pid_alive
from ._facts import long_tool, new_markers, tool_pids, tools_running


def config(model: FakeResponsesServer, workspace: Path, **kw: object) -> ta.AgentConfig:
    return ta.AgentConfig(auth="test-key", workspace=workspace, thinking=ta.Thinking.LOW,
                          responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                 websocket_url=model.url), **kw)  # type: ignore[arg-type]


def submit(task: AgentTask, stream: bool) -> tuple[str, bytes, bool]:
    """``run_task``'s arguments, as the driver sends them."""
    return task.task_id, ray.cloudpickle.dumps(travelling(task)), stream


class Driver:
    """Polls like the pool's link does: acknowledges what it received, per task."""

    def __init__(self, host: AgentHost) -> None:
        self.host = host
        self.events: dict[str, list[ta.AgentEvent]] = collections.defaultdict(list)
        self.results: dict[str, TaskResult] = {}
        self.started: list[str] = []
        self.paths: dict[str, Path] = {}
        self.replies: list[PollReply] = []

    async def poll(self, *task_ids: str, paused: frozenset[str] = frozenset(), wait: float | None = None) -> PollReply:
        following = [t for t in task_ids if t not in self.results]  # a result, once received, is acknowledged
        acks = {t: (len(self.events[t]), t in self.started, t in self.paths) for t in following}
        reply = await self.host.poll(acks, paused, wait)
        self.replies.append(reply)
        for task_id, batch in reply.batches.items():
            assert task_id not in self.results, "nothing comes after a task's result"
            if batch.start is not None:
                assert not self.events[task_id], "the start comes first"
                self.started.append(task_id)
            self.events[task_id].extend(batch.events)
            if batch.rollout_path is not None:
                self.paths[task_id] = batch.rollout_path
            if batch.result is not None:
                self.results[task_id] = batch.result
        return reply

    async def drain(self, *task_ids: str) -> None:
        while not all(t in self.results for t in task_ids):
            await self.poll(*task_ids)


async def drain(host: AgentHost, task_id: str) -> tuple[list[ta.AgentEvent], TaskResult]:
    driver = Driver(host)
    await driver.drain(task_id)
    return driver.events[task_id], driver.results[task_id]


async def test_one_poll_serves_every_task_in_order_and_a_paused_task_waits(
    model: FakeResponsesServer, workspace: Path
) -> None:
    host = AgentHost(3)
    first = AgentTask(config(model, workspace), prompts=["one", "two"])
    second = AgentTask(config(model, workspace), prompts=["three"])
    driver = Driver(host)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.run_task, *submit(first, True))
            nursery.start_soon(host.run_task, *submit(second, True))
            both = await driver.poll(first.task_id, second.task_id)
            assert set(both.batches) == {first.task_id, second.task_id}  # one reply serves every task
            before_pause = len(driver.events[second.task_id])
            # Pause the second task: its events wait on the actor, counted, never sent.
            paused = frozenset({second.task_id})
            while len(driver.events[first.task_id]) < 10:
                reply = await driver.poll(first.task_id, second.task_id, paused=paused, wait=0.5)
                assert second.task_id not in reply.batches
            while not host._records[second.task_id].ended:
                await driver.poll(first.task_id, second.task_id, paused=paused, wait=0.05)
            held = len(host._records[second.task_id].buffer)
            assert held > 0 and host.statistics().buffered_events >= held
            assert len(driver.events[second.task_id]) == before_pause
            await driver.drain(first.task_id, second.task_id)
    assert sorted(driver.started) == sorted([first.task_id, second.task_id])
    for task in (first, second):
        events, result = driver.events[task.task_id], driver.results[task.task_id]
        assert [e.seq for e in events] == list(range(1, len(events) + 1))  # in order, none twice, none lost
        assert result.status is TaskStatus.COMPLETED and result.error is None
        assert result.events == len(events) and result.actor == 3
        assert events[-1].kind.is_terminal
    assert [t.final_message for t in driver.results[first.task_id].turns] == ["echo: one", "echo: two"]
    assert host._records  # the last events and the results, kept until acknowledged
    await driver.poll(wait=0)  # acknowledges both results: the actor forgets the tasks
    assert not host._records
    stats = host.statistics()
    assert (stats.tasks_started, stats.tasks_finished, stats.agents, stats.buffered_events) == (2, 2, 0, 0)
    assert stats.rss_bytes > 0 and stats.peak_rss_bytes >= stats.rss_bytes and stats.cpu_seconds > 0


async def test_a_reply_lost_in_flight_is_sent_again(model: FakeResponsesServer, workspace: Path) -> None:
    host = AgentHost(0)
    task = AgentTask(config(model, workspace), prompts=["again"])
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.run_task, *submit(task, True))
            first = await host.poll({task.task_id: (0, False, False)}, frozenset(), None)  # then "lost"
            again = await host.poll({task.task_id: (0, False, False)}, frozenset(), None)
            batch, resent = first.batches[task.task_id], again.batches[task.task_id]
            assert batch.start is not None and resent.start is not None
            assert resent.events[: len(batch.events)] == batch.events
            driver = Driver(host)
            await driver.drain(task.task_id)  # from the beginning: nothing was acknowledged
            final = driver.results[task.task_id]
            acks = {task.task_id: (len(driver.events[task.task_id]), True, False)}
            lost_final = await host.poll(acks, frozenset(), 0)
    assert lost_final.batches[task.task_id].result == final  # the result, sent again
    assert [e.seq for e in driver.events[task.task_id]] == list(range(1, final.events + 1))


async def test_a_poll_with_nothing_to_say_waits_at_most_its_bound() -> None:
    host = AgentHost(0)
    with trio.fail_after(5):
        reply = await host.poll({"gone": (3, True, False)}, frozenset(), 0.05)
    assert reply.batches == {} and reply.statistics.index == 0
    host.cancel("unknown")  # a task that ended (or never came) leaves nothing behind
    assert not host._records


async def test_cancelling_a_running_task_still_delivers_its_terminal_event(
    model: FakeResponsesServer, workspace: Path
) -> None:
    host = AgentHost(0)
    [marker] = new_markers(1)
    task = AgentTask(config(model, workspace), prompts=["first", long_tool(marker)])
    driver = Driver(host)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.run_task, *submit(task, True))
            while not tools_running([marker])():
                await driver.poll(task.task_id, wait=0.05)
            [pid] = tool_pids([marker])
            host.cancel(task.task_id)
            await driver.drain(task.task_id)
    events, result = driver.events[task.task_id], driver.results[task.task_id]
    assert result.status is TaskStatus.CANCELLED and isinstance(result.error, TaskCancelled)
    assert [turn.final_message for turn in result.turns] == ["echo: first"]
    assert [e.payload["status"] for e in events if e.kind.is_terminal] == ["completed", "cancelled"]
    assert events[-1].kind.is_terminal
    assert not pid_alive(pid)  # its process tree was killed before the result
    assert result.rollout_path is None


async def test_without_a_stream_events_are_counted_not_kept(model: FakeResponsesServer, workspace: Path) -> None:
    host = AgentHost(0)
    task = AgentTask(config(model, workspace), prompts=["quiet"])
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.run_task, *submit(task, False))
            events, result = await drain(host, task.task_id)
    assert events == [] and result.events > 0 and result.final_message == "echo: quiet"


async def _crashing_body(agent: ta.Agent) -> None:
    await (await agent.prompt("before the crash")).result()
    raise LookupError("the body's own bug")


async def _wrong_body(agent: ta.Agent) -> object:
    return "not a turn"


async def _failing_prompt_body(agent: ta.Agent) -> None:
    await agent.prompt("   ")  # InvalidPrompt: an AgentError, the task's outcome


@pytest.mark.parametrize(
    ("body", "error", "text"),
    [
        (_crashing_body, TaskCrashed, "LookupError: the body's own bug"),
        (_wrong_body, TaskCrashed, "must return a TurnResult"),
        (_failing_prompt_body, ta.InvalidPrompt, "non-empty text"),
    ],
)
async def test_a_failing_body_is_a_failed_result(
    model: FakeResponsesServer, workspace: Path, body: object, error: type[Exception], text: str
) -> None:
    host = AgentHost(0)
    task = AgentTask(config(model, workspace), body=body)  # type: ignore[arg-type]
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.run_task, *submit(task, True))
            _, result = await drain(host, task.task_id)
    assert result.status is TaskStatus.FAILED and isinstance(result.error, error)
    assert text in str(result.error)
    if isinstance(result.error, TaskCrashed):
        assert result.error.traceback and result.error.exception_type
    assert host.statistics().agents == 0


async def test_resume_without_a_rollout_starts_the_session_fresh(model: FakeResponsesServer, workspace: Path) -> None:
    host = AgentHost(0)
    rollout = ta.RolloutConfig(workspace / "home")
    task = AgentTask(config(model, workspace, rollout=rollout), prompts=["p"], resume=True)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.run_task, *submit(task, True))
            _, result = await drain(host, task.task_id)
    assert result.status is TaskStatus.COMPLETED and result.session_id == task.config.session_id
    assert result.rollout_path is not None and result.rollout_path.exists()
    # Resumed again, the same session continues from that rollout.
    again = task.resumed("q")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.run_task, *submit(again, False))
        _, result = await drain(host, again.task_id)
    history = result.turns[-1].snapshot().history
    assert [m["content"][0]["text"] for m in history if m.get("role") == "user"][-2:] == ["p", "q"]


async def test_a_task_the_actor_cannot_load_is_a_failed_result() -> None:
    host = AgentHost(2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.run_task, "task-x", b"not a pickle", True)
        events, result = await drain(host, "task-x")
    assert result.status is TaskStatus.FAILED and isinstance(result.error, TaskCrashed)
    assert "actor 2 could not load task task-x" in str(result.error) and events == []
    assert host.statistics().tasks_finished == 1


def test_an_unusable_task_is_refused_where_it_is_written(workspace: Path) -> None:
    cfg = ta.AgentConfig(auth="test-key", workspace=workspace)
    with pytest.raises(ta.ConfigError, match="either prompts"):
        AgentTask(cfg)
    with pytest.raises(ta.ConfigError, match="either prompts"):
        AgentTask(cfg, prompts=["a"], body=_wrong_body)
    with pytest.raises(ta.ConfigError, match="rollout=RolloutConfig"):
        AgentTask(cfg, prompts=["a"], resume=True)
    with pytest.raises(ta.ConfigError, match="prompts must be"):
        AgentTask(cfg, prompts=[1])  # type: ignore[list-item]
    assert AgentTask(cfg, prompts="one").prompts == ("one",)  # type: ignore[arg-type]
    assert AgentTask(cfg, prompts=["a"]).task_id != AgentTask(cfg, prompts=["a"]).task_id


def test_batches_default_to_empty() -> None:
    assert EventBatch() == EventBatch((), None, None, None)


def test_agents_of_an_actor_share_its_tls_context(workspace: Path) -> None:
    host = AgentHost(0)
    shared = host._tls()
    assert host._tls() is shared
    cfg = ta.AgentConfig(auth="test-key", workspace=workspace)
    assert with_tls(cfg, shared).responses.ssl_context is shared
    assert with_tls(cfg, shared).session_id == cfg.session_id
    own = ssl.create_default_context()
    mine = ta.AgentConfig(auth="test-key", workspace=workspace, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                       ssl_context=own))
    assert with_tls(mine, shared) is mine
