"""A pool that heals: a lost actor is replaced at its index (bounded, reported), tasks
waiting for a slot wait for the replacement, a LOST result says where its rollout is,
and actors reserve a CPU each. Hostile cases: an actor killed mid-turn, killed again
past the bound, a body whose result does not pickle."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent.ray import ActorLost, AgentTask, TaskCrashed, TaskStatus, open_ray_pool
from trio_agent.ray._pool import _options
from trio_agent.testing import FakeResponsesServer

from ._facts import alive, kill, long_tool, new_markers, tool_pids, tools_running, wait_for

pytestmark = pytest.mark.usefixtures("ray_cluster")


def config(model: FakeResponsesServer, workspace: Path, rollout: ta.RolloutConfig | None = None) -> ta.AgentConfig:
    return ta.AgentConfig(auth="test-key", workspace=workspace, thinking=ta.Thinking.LOW, rollout=rollout,
                          responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=model.url))


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "trio_agent.ray" and r.levelno == logging.WARNING]


async def test_a_killed_actor_is_replaced_at_its_index_and_its_task_resumes_from_the_lost_results_rollout(
    model: FakeResponsesServer, workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "trio_agent.ray")
    rollout = ta.RolloutConfig(tmp_path / "shared-rollouts")
    [marker] = new_markers(1)
    doomed = AgentTask(config(model, workspace, rollout=rollout), prompts=["remember 7", long_tool(marker)])
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=2, agents_per_actor=2) as pool:
            first_pids = [info.pid for info in pool.actors]
            handle = await pool.start(doomed)
            await wait_for(tools_running([marker]), "the doomed task's tool starting")
            assert handle.actor == 0
            kill(first_pids[0], signal.SIGKILL)  # mid-turn: its tool is running
            lost = await handle.result()
            await wait_for(lambda: pool.statistics().restarts == 1, "the lost actor being replaced")
            stats = pool.statistics()
            replaced = pool.actors
            # Both actors serve again: two tasks at once land on both.
            again = [await pool.start(doomed.resumed("what was it?"))]
            again.append(await pool.start(AgentTask(config(model, workspace), prompts=["the other"])))
            results = [await h.result() for h in again]
        every_pid = [*first_pids, replaced[0].pid]
    assert lost.status is TaskStatus.LOST and isinstance(lost.error, ActorLost)
    # The LOST result says where the rollout is: the one the resumed task continued.
    assert lost.rollout_path is not None and lost.rollout_path == rollout.find(doomed.config.session_id)
    assert results[0].rollout_path == lost.rollout_path
    assert [r.status for r in results] == [TaskStatus.COMPLETED] * 2
    assert results[0].final_message == "echo: what was it?"
    assert {r.actor for r in results} == {0, 1}
    assert results[0].pid in {replaced[0].pid, replaced[1].pid}
    assert (stats.live_actors, stats.num_actors, stats.lost) == (2, 2, 1)
    assert replaced[0].index == 0 and replaced[0].pid not in first_pids and replaced[1].pid == first_pids[1]
    [report] = warnings_of(caplog)
    assert f"actor 0 (pid {first_pids[0]}) died; replaced by pid {replaced[0].pid}" in report
    await wait_for(lambda: not alive(every_pid), "every actor process, the replacement's included, ending")


async def test_replacements_are_bounded_and_queued_tasks_wait_for_one(
    model: FakeResponsesServer, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "trio_agent.ray")
    markers = new_markers(2)
    pids: list[int] = []
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=1, agents_per_actor=1, max_restarts=1, restart_window=3600) as pool:
            pids.append(pool.actors[0].pid)
            busy = await pool.start(AgentTask(config(model, workspace), prompts=[long_tool(markers[0])]))
            waiting = await pool.start(AgentTask(config(model, workspace), prompts=["after the loss"]))
            await wait_for(tools_running(markers[:1]), "the first tool starting")
            tool = tool_pids(markers[:1])
            kill(pids[0], signal.SIGKILL)
            assert (await busy.result()).status is TaskStatus.LOST
            # The queued task did not fail with the pool empty: it ran on the replacement.
            done = await waiting.result()
            assert done.status is TaskStatus.COMPLETED and done.pid != pids[0]
            pids.append(pool.actors[0].pid)
            assert done.pid == pids[1]
            # Killed again, past the bound (one replacement per hour): not replaced.
            second = await pool.start(AgentTask(config(model, workspace), prompts=[long_tool(markers[1])]))
            await wait_for(tools_running(markers[1:]), "the second tool starting")
            tool += tool_pids(markers[1:])
            kill(pids[1], signal.SIGKILL)
            assert (await second.result()).status is TaskStatus.LOST
            orphan = await pool.run(AgentTask(config(model, workspace), prompts=["nobody runs me"]))
            stats = pool.statistics()
    assert orphan.status is TaskStatus.LOST and isinstance(orphan.error, ActorLost)
    assert "none could be replaced (max_restarts)" in str(orphan.error)
    assert (stats.restarts, stats.live_actors, stats.lost) == (1, 0, 3)
    replaced, refused = warnings_of(caplog)
    assert f"replaced by pid {pids[1]}" in replaced
    assert f"actor 0 (pid {pids[1]}) died and is not replaced" in refused and "max_restarts=1" in refused
    await wait_for(lambda: not alive(pids + tool), "the actors and their tools ending")


async def test_max_restarts_zero_keeps_the_old_behaviour(model: FakeResponsesServer, workspace: Path) -> None:
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=2, agents_per_actor=2, max_restarts=0) as pool:
            pids = [info.pid for info in pool.actors]
            kill(pids[0], signal.SIGKILL)
            await wait_for(lambda: pool.statistics().live_actors == 1, "the pool noticing the loss")
            results = [await pool.run(AgentTask(config(model, workspace), prompts=[f"p{i}"])) for i in range(3)]
            stats = pool.statistics()
    assert [(r.status, r.actor) for r in results] == [(TaskStatus.COMPLETED, 1)] * 3
    assert stats.restarts == 0 and stats.live_actors == 1
    await wait_for(lambda: not alive(pids), "the actors ending")


def test_actors_reserve_one_cpu_by_default_and_the_knob_changes_it() -> None:
    assert _options(None)["num_cpus"] == 1
    assert _options({"num_cpus": 0.25})["num_cpus"] == 0.25
    with pytest.raises(ta.ConfigError, match="max_restarts must be an integer >= 0"):
        open_ray_pool(max_restarts=-1)


async def test_more_actors_than_cpus_do_not_start(model: FakeResponsesServer) -> None:
    """The cluster has 2 CPUs: a third actor has nowhere to go, and the pool says so
    (and kills the two that started)."""
    with trio.fail_after(60), pytest.raises(ActorLost, match="each reserves 1 CPU"):
        async with open_ray_pool(num_actors=3, agents_per_actor=1, startup_timeout=5):
            pytest.fail("three actors started on two CPUs")
    # Their CPUs are back: two actors start again.
    with trio.fail_after(60):
        async with open_ray_pool(num_actors=2, agents_per_actor=1, startup_timeout=30) as pool:
            assert len({info.pid for info in pool.actors}) == 2


async def _unpicklable_result(agent: ta.Agent) -> ta.TurnResult:
    turn = await (await agent.prompt("fine")).result()
    return ta.TurnResult(turn.turn_id, threading.Lock(), None)  # type: ignore[arg-type]  # hostile on purpose


async def test_a_result_that_does_not_pickle_fails_its_task_alone(
    model: FakeResponsesServer, workspace: Path
) -> None:
    """A body whose result cannot cross to the driver fails with ``TaskCrashed``; the
    actor's other tasks and the actor itself are untouched (no loss, no replacement)."""
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=1, agents_per_actor=2) as pool:
            pid = pool.actors[0].pid
            bad = await pool.start(AgentTask(config(model, workspace), body=_unpicklable_result))
            good = await pool.start(AgentTask(config(model, workspace), prompts=["bystander"]))
            results = [await bad.result(), await good.result()]
            after = await pool.run(AgentTask(config(model, workspace), prompts=["after"]))
            stats = pool.statistics()
    assert results[0].status is TaskStatus.FAILED and isinstance(results[0].error, TaskCrashed)
    assert "cannot be sent to the driver" in str(results[0].error) and "lock" in str(results[0].error)
    assert (results[1].status, after.status) == (TaskStatus.COMPLETED, TaskStatus.COMPLETED)
    assert after.pid == pid and (stats.restarts, stats.lost, stats.live_actors) == (0, 0, 1)
