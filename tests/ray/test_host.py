"""The actor's Trio side (``AgentHost``) on its own, without Ray: the poll protocol,
cancellation before and during a run, and what a task's outcome is made of."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray.cloudpickle
import trio
import trio.testing

import trio_agent as ta
from trio_agent.ray import AgentTask, TaskCancelled, TaskCrashed, TaskStatus
from trio_agent.ray._host import AgentHost
from trio_agent.ray._values import EventBatch, TaskResult
from trio_agent.testing import FakeResponsesServer


def config(model: FakeResponsesServer, workspace: Path, **kw: object) -> ta.AgentConfig:
    return ta.AgentConfig(auth="test-key", workspace=workspace, thinking=ta.Thinking.LOW,
                          responses=ta.Responses(websocket_url=model.url), **kw)  # type: ignore[arg-type]


def submit(task: AgentTask, stream: bool) -> tuple[str, bytes, bool]:
    """``run_task``'s arguments, as the driver sends them."""
    return task.task_id, ray.cloudpickle.dumps(task), stream


async def drain(host: AgentHost, task_id: str) -> tuple[list[ta.AgentEvent], TaskResult]:
    """Poll like the driver does until the result arrives."""
    events: list[ta.AgentEvent] = []
    start_seen = False
    while True:
        batch = await host.poll(task_id, len(events), start_seen)
        start_seen = start_seen or batch.start is not None
        events.extend(batch.events)
        if batch.result is not None:
            return events, batch.result


async def test_events_then_result_and_a_lost_reply_is_resent(model: FakeResponsesServer, workspace: Path) -> None:
    host = AgentHost(3)
    task = AgentTask(config(model, workspace), prompts=["one", "two"])
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.run_task, *submit(task, True))
            first = await host.poll(task.task_id, 0, False)
            assert first.start is not None and first.start.session_id == task.config.session_id
            while not (batch := await host.poll(task.task_id, 0, True)).events:
                pass
            again = await host.poll(task.task_id, 0, True)  # the same cursor: nothing was acknowledged
            assert again.events[: len(batch.events)] == batch.events
            assert host.statistics().buffered_events >= len(again.events)
            events, result = await drain(host, task.task_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert result.status is TaskStatus.COMPLETED and result.error is None
    assert [turn.final_message for turn in result.turns] == ["echo: one", "echo: two"]
    assert result.events == len(events) and result.actor == 3
    assert [e.payload["status"] for e in events if e.kind.is_terminal] == ["completed", "completed"]
    stats = host.statistics()
    assert (stats.tasks_started, stats.tasks_finished, stats.agents, stats.buffered_events) == (1, 1, 0, 0)
    assert stats.rss_bytes > 0 and stats.peak_rss_bytes >= stats.rss_bytes


async def test_a_task_cancelled_before_it_arrives_never_opens_its_agent(
    model: FakeResponsesServer, workspace: Path
) -> None:
    host = AgentHost(0)
    host.cancel("unknown")  # a task that ended (or never came) leaves nothing behind
    assert host.statistics().buffered_events == 0 and not host._records
    task = AgentTask(config(model, workspace), prompts=["never"])
    drained: list[tuple[list[ta.AgentEvent], TaskResult]] = []

    async def poll_first() -> None:
        drained.append(await drain(host, task.task_id))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll_first)  # the driver's poll may arrive before the task
            await trio.testing.wait_all_tasks_blocked()
            host.cancel(task.task_id)  # kept in the record the poll made
            nursery.start_soon(host.run_task, *submit(task, True))
    [(events, result)] = drained
    assert result.status is TaskStatus.CANCELLED and isinstance(result.error, TaskCancelled)
    assert events == [] and result.events == 0 and model.connections == []


async def test_cancelling_a_running_task_still_delivers_its_terminal_event(
    model: FakeResponsesServer, workspace: Path
) -> None:
    host = AgentHost(0)
    pid_file = workspace / "tool.pid"
    task = AgentTask(config(model, workspace), prompts=["first", f"run: echo $$ > {pid_file}; exec sleep 60"])
    events: list[ta.AgentEvent] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.run_task, *submit(task, True))
            while not pid_file.exists() or not pid_file.read_text().strip():
                batch = await host.poll(task.task_id, len(events), True)
                events.extend(batch.events)
            host.cancel(task.task_id)
            more, result = await drain(host, task.task_id)
    events += more
    assert result.status is TaskStatus.CANCELLED and isinstance(result.error, TaskCancelled)
    assert [turn.final_message for turn in result.turns] == ["echo: first"]
    assert [e.payload["status"] for e in events if e.kind.is_terminal] == ["completed", "cancelled"]
    assert events[-1].kind.is_terminal
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)
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
