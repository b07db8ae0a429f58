"""The pool on a local Ray cluster (2 CPUs, 2 actors): scale, structured cancellation
across processes, a killed actor, back-pressure and limits."""

from __future__ import annotations

import collections
import functools
import json
import signal
import ssl
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent.ray import (
    ActorLost,
    AgentTask,
    PoolClosed,
    TaskCancelled,
    TaskEvent,
    TaskStatus,
    open_ray_pool,
)
from trio_agent.testing import FakeResponsesServer

from ._facts import alive, kill, long_tool, new_markers, tool_pids, tools_running, wait_for

pytestmark = pytest.mark.usefixtures("ray_cluster")


def config(model: FakeResponsesServer, workspace: Path, **kw: object) -> ta.AgentConfig:
    kw.setdefault("responses", ta.Responses(profile=ta.Profile.OPENAI, websocket_url=model.url))
    return ta.AgentConfig(auth="test-key", workspace=workspace, thinking=ta.Thinking.LOW, **kw)  # type: ignore[arg-type]


class Events:
    """Collects every TaskEvent from a channel the pool sends to (runs in the test's nursery)."""

    def __init__(self, capacity: float = 64) -> None:
        self.send, self._receive = trio.open_memory_channel[TaskEvent](capacity)
        self.by_task: dict[str, list[ta.AgentEvent]] = collections.defaultdict(list)

    async def consume(self) -> None:
        async with self._receive:
            async for item in self._receive:
                self.by_task[item.task_id].append(item.event)

    def terminal(self, task_id: str) -> list[str]:
        return [e.payload["status"] for e in self.by_task[task_id] if e.kind.is_terminal]


async def test_two_hundred_agents_complete_across_two_actors_with_every_event(
    model: FakeResponsesServer, workspace: Path, nursery: trio.Nursery
) -> None:
    events = Events()
    nursery.start_soon(events.consume)
    tasks = [AgentTask(config(model, workspace), prompts=[f"hello {i}"]) for i in range(200)]
    with trio.fail_after(240):
        async with open_ray_pool(num_actors=2, agents_per_actor=32, max_queued=16) as pool:
            async with events.send:
                results = await pool.map(tasks, events=events.send)
            stats = pool.statistics()
            fresh = await pool.actor_statistics()
    assert [r.task_id for r in results] == [t.task_id for t in tasks]
    assert all(r.status is TaskStatus.COMPLETED for r in results), [r.error for r in results if r.error][:3]
    assert [r.final_message for r in results] == [f"echo: hello {i}" for i in range(200)]
    for result in results:
        seen = events.by_task[result.task_id]
        assert [e.seq for e in seen] == list(range(1, result.events + 1))  # in order, none missing
        assert events.terminal(result.task_id) == ["completed"] and seen[-1].kind.is_terminal
        assert {e.session_id for e in seen} == {result.session_id}
    per_actor = collections.Counter(r.actor for r in results)
    assert set(per_actor) == {0, 1} and min(per_actor.values()) >= 50, per_actor
    assert {r.pid for r in results} == {info.pid for info in pool.actors}
    assert (stats.completed, stats.failed, stats.lost, stats.queued, stats.running) == (200, 0, 0, 0, 0)
    assert stats.events_delivered == sum(r.events for r in results)
    for actor in fresh:
        assert actor is not None and actor.tasks_finished == per_actor[actor.index]
        assert actor.agents == 0 and actor.buffered_events == 0 and actor.rss_bytes > 10 << 20


async def test_cancelling_the_callers_scope_kills_every_remote_tool_and_delivers_cancelled_events(
    model: FakeResponsesServer, workspace: Path, tmp_path: Path, nursery: trio.Nursery
) -> None:
    events = Events()
    nursery.start_soon(events.consume)
    rollout = ta.RolloutConfig(tmp_path / "rollouts")
    markers = new_markers(8)
    tasks = [AgentTask(config(model, workspace, rollout=rollout), prompts=[long_tool(m)]) for m in markers]
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=2, agents_per_actor=4) as pool:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as inner:
                    inner.start_soon(functools.partial(pool.map, tasks, events=events.send))
                    await wait_for(tools_running(markers), "every remote tool starting")
                    pids = tool_pids(markers)
                    scope.cancel()
            assert scope.cancelled_caught
            assert alive(pids) == []  # the tools' process trees are gone by the time map returns
            stats = pool.statistics()
        await events.send.aclose()
    assert stats.cancelled == 8 and stats.running == 0
    for task in tasks:
        assert events.terminal(task.task_id) == ["cancelled"]
        seen = events.by_task[task.task_id]
        assert seen[-1].kind is ta.EventKind.RUN_FAILED
        results = [e for e in seen if e.kind is ta.EventKind.TOOL_RESULT]
        assert results and results[-1].payload["status"] == "cancelled"
        # The rollout was flushed with the aborted call paired and the turn marked aborted.
        durable = rollout.load_session(task.config.session_id)
        assert durable.interrupted_calls == ()
        text = json.dumps(durable.snapshot.history)
        assert "aborted by user" in text and "<turn_aborted>" in text


async def test_cancelling_one_task_leaves_the_others_running(
    model: FakeResponsesServer, workspace: Path, nursery: trio.Nursery
) -> None:
    events = Events()
    nursery.start_soon(events.consume)
    victim_tool, quiet_tool = new_markers(2)
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=2, agents_per_actor=2) as pool:
            victim = await pool.start(
                AgentTask(config(model, workspace), prompts=["warm up", long_tool(victim_tool)]), events=events.send
            )
            others = [
                await pool.start(AgentTask(config(model, workspace), prompts=[f"p{i}"]), events=events.send)
                for i in range(6)
            ]
            # A task without an event channel is cancelled the same way.
            quiet = await pool.start(AgentTask(config(model, workspace), prompts=[long_tool(quiet_tool)]))
            assert await victim.wait_running()
            await wait_for(tools_running([victim_tool, quiet_tool]), "the victims' tools starting")
            pids = tool_pids([victim_tool, quiet_tool])
            await victim.cancel()
            await victim.cancel()  # a no-op once it ended
            result = await victim.result()
            await quiet.cancel()
            quiet_result = await quiet.result()
            rest = [await other.result() for other in others]
        await events.send.aclose()
    assert quiet_result.status is TaskStatus.CANCELLED and quiet_result.events > 0
    assert alive(pids) == []
    assert result.status is TaskStatus.CANCELLED and isinstance(result.error, TaskCancelled)
    assert [turn.final_message for turn in result.turns] == ["echo: warm up"]
    assert events.terminal(victim.task_id) == ["completed", "cancelled"]
    assert [r.status for r in rest] == [TaskStatus.COMPLETED] * 6


async def test_a_killed_actor_fails_its_tasks_and_the_task_resumes_from_its_rollout_elsewhere(
    model: FakeResponsesServer, workspace: Path, tmp_path: Path, nursery: trio.Nursery
) -> None:
    events = Events()
    nursery.start_soon(events.consume)
    rollout = ta.RolloutConfig(tmp_path / "shared-rollouts")  # storage both actors reach
    [marker] = new_markers(1)
    doomed = AgentTask(config(model, workspace, rollout=rollout), prompts=["remember the number 7", long_tool(marker)])
    with trio.fail_after(120):
        # Not replaced (max_restarts=0; test_heal.py has the replacement): the task resumes on the other actor.
        async with open_ray_pool(num_actors=2, agents_per_actor=4, max_restarts=0) as pool:
            handle = await pool.start(doomed, events=events.send)
            bystander = await pool.start(AgentTask(config(model, workspace), prompts=["bystander"]))
            await wait_for(tools_running([marker]), "the doomed task's tool starting")
            assert (handle.actor, bystander.actor) == (0, 1)  # the least busy actor first
            [tool_pid] = tool_pids([marker])
            kill(pool.actors[0].pid, signal.SIGKILL)
            lost = await handle.result()
            assert (await bystander.result()).status is TaskStatus.COMPLETED
            await wait_for(lambda: not alive([tool_pid]), "the dead actor's tool exiting")
            assert pool.statistics().live_actors == 1
            resumed = await pool.run(doomed.resumed("what was the number?"), events=events.send)
            after = await pool.run(AgentTask(config(model, workspace), prompts=["still here"]))
        await events.send.aclose()
    assert lost.status is TaskStatus.LOST and isinstance(lost.error, ActorLost)
    assert lost.error.actor == 0 and lost.error.session_id == doomed.config.session_id
    assert "resume it with pool.run(task.resumed(...))" in str(lost.error)
    assert lost.rollout_path is not None and lost.rollout_path == resumed.rollout_path
    assert events.terminal(doomed.task_id) == ["completed"]  # the first turn's; the second died with the actor
    assert resumed.status is TaskStatus.COMPLETED and resumed.actor == 1
    assert resumed.session_id == doomed.config.session_id
    assert resumed.final_message == "echo: what was the number?"
    # The resumed agent replayed what the lost one committed: both prompts, the tool call
    # answered as interrupted, then the new prompt.
    replay = next(r for r in model.requests if "what was the number?" in json.dumps(r))
    texts = json.dumps(replay["input"])
    assert "remember the number 7" in texts and long_tool(marker).removeprefix("run: ") in texts
    assert "the session ended (its process exited)" in texts
    assert after.status is TaskStatus.COMPLETED and after.actor == 1


async def test_back_pressure_bounds_the_queue_and_a_slow_consumer_loses_nothing(
    model: FakeResponsesServer, workspace: Path, nursery: trio.Nursery
) -> None:
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=1, agents_per_actor=1, max_queued=1) as pool:
            slow_send, slow_receive = trio.open_memory_channel[TaskEvent](0)
            # A second of tool time in the middle: the task cannot end within one reply.
            first = await pool.start(
                AgentTask(config(model, workspace), prompts=["a", "run: sleep 1", "c"]), events=slow_send
            )
            second = await pool.start(AgentTask(config(model, workspace), prompts=["queued"]))
            assert pool.statistics().queued == 1
            third = AgentTask(config(model, workspace), prompts=["third"])
            with trio.move_on_after(1) as blocked:
                await pool.start(third)  # one running, one queued: the caller waits
            assert blocked.cancelled_caught
            # Nobody reads the first task's events: its agent still finishes, and its
            # events wait on the actor -- counted, not dropped.
            while (stats := (await pool.actor_statistics())[0]) is not None and stats.tasks_finished < 1:  # noqa: ASYNC110
                await trio.sleep(0.05)  # the actor's progress is another process's: poll it
            assert stats is not None and stats.buffered_events > 0
            assert first.status is TaskStatus.RUNNING
            received: list[TaskEvent] = []

            async def read_late() -> None:
                async for item in slow_receive:
                    received.append(item)

            nursery.start_soon(read_late)
            result = await first.result()  # returns once every event was delivered
            assert [e.event.seq for e in received] == list(range(1, result.events + 1))
            await slow_send.aclose()
            assert (await second.result()).status is TaskStatus.COMPLETED
            assert (await pool.run(third)).status is TaskStatus.COMPLETED
        with pytest.raises(PoolClosed):
            await pool.start(third)


async def test_a_task_body_gets_the_opened_agent(model: FakeResponsesServer, workspace: Path) -> None:
    task = AgentTask(config(model, workspace), body=_two_turns_and_a_fork)
    with trio.fail_after(60):
        async with open_ray_pool(num_actors=2, agents_per_actor=2) as pool:
            result = await pool.run(task)
    assert result.status is TaskStatus.COMPLETED, result.error
    assert [t.final_message for t in result.turns] == ["echo: one", "echo: two"]
    assert result.turns[-1].snapshot().history  # the TurnResult crossed the cluster intact


async def _two_turns_and_a_fork(agent: ta.Agent) -> list[ta.TurnResult]:
    one = await (await agent.prompt("one")).result()
    two = await (await agent.prompt("two")).result()
    return [one, two]


async def test_every_actor_runs_its_agents_with_its_collector_tuned(
    model: FakeResponsesServer, workspace: Path
) -> None:
    tasks = [AgentTask(config(model, workspace), body=_collector_of_the_actor) for _ in range(2)]
    with trio.fail_after(60):
        async with open_ray_pool(num_actors=2, agents_per_actor=1) as pool:
            results = await pool.map(tasks)  # one slot each: one task on each actor
    assert {result.actor for result in results} == {0, 1}
    assert [result.status for result in results] == [TaskStatus.COMPLETED] * 2, [r.error for r in results]


async def _collector_of_the_actor(agent: ta.Agent) -> None:
    import gc

    from trio_agent.ray._actor import COLLECTOR_THRESHOLD

    state = (gc.get_threshold(), gc.get_freeze_count())
    if state[0] != COLLECTOR_THRESHOLD or state[1] < 10_000:  # Ray's and the library's modules are frozen
        raise AssertionError(f"the actor's collector is not tuned: threshold, frozen = {state}")


async def test_pool_arguments_are_checked(model: FakeResponsesServer, workspace: Path) -> None:
    with pytest.raises(ta.ConfigError, match="agents_per_actor must be a positive integer"):
        open_ray_pool(2, 0)
    with pytest.raises(ta.ConfigError, match="max_restarts"):
        open_ray_pool(actor_options={"max_restarts": 3})
    rollout = ta.RolloutConfig(workspace / "home")
    cfg = config(model, workspace, rollout=rollout)
    with trio.fail_after(60):
        async with open_ray_pool(num_actors=1, agents_per_actor=2) as pool:
            first = await pool.start(AgentTask(cfg, prompts=["a"]))
            with pytest.raises(ta.ConfigError, match="already running in this pool"):
                await pool.start(AgentTask(cfg, prompts=["b"]))
            assert (await first.result()).status is TaskStatus.COMPLETED
            again = await pool.run(AgentTask(cfg, prompts=["b"], resume=True))  # the session is free again
            local_only = ta.Responses(
                profile=ta.Profile.OPENAI, websocket_url=model.url, ssl_context=ssl.create_default_context()
            )
            with pytest.raises(ta.ConfigError, match="cannot be sent to an actor"):
                await pool.start(AgentTask(config(model, workspace, responses=local_only), prompts=["x"]))
            assert pool.statistics().queued == 0
    assert again.status is TaskStatus.COMPLETED
