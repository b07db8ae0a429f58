"""A driver that is not Trio: ``blocking_ray_pool`` from plain, synchronous code, its
results composed with ``ray.get``/``ray.wait`` and cancelled through the handle (or
``ray.cancel``). The tests are plain functions: no Trio loop in the test's thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import ray

import trio_agent as ta
from trio_agent.ray import AgentTask, TaskCancelled, TaskStatus, blocking_ray_pool

from .._os_facts import pid_alive
from ._facts import BOUND, long_tool, new_markers, tool_pid, tool_pids
from ._model import model_in_thread

pytestmark = pytest.mark.usefixtures("ray_cluster")


def config(url: str, workspace: Path) -> ta.AgentConfig:
    return ta.AgentConfig(auth="test-key", workspace=workspace, thinking=ta.Thinking.LOW,
                          responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=url))


def wait_until(check: Callable[[], bool], what: str) -> None:
    """An OS fact, from a thread without an event loop: checked every 20 ms, bounded."""
    pause = threading.Event()
    for _ in range(int(BOUND / 0.02)):
        if check():
            return
        pause.wait(0.02)
    pytest.fail(f"{what} did not happen within {BOUND} s")


def test_results_are_object_refs_for_ray_get_and_ray_wait(workspace: Path) -> None:
    with model_in_thread() as url, blocking_ray_pool(num_actors=2, agents_per_actor=2, max_queued=2) as pool:
        actor_pids = [info.pid for info in pool.actors]
        actor_pids.append(ray.get(pool._results.pid.remote(), timeout=BOUND))  # the results actor too
        handles = [pool.submit(AgentTask(config(url, workspace), prompts=[f"hello {i}"])) for i in range(6)]
        refs = [handle.ref for handle in handles]
        assert all(isinstance(ref, ray.ObjectRef) for ref in refs)
        ready: list[ray.ObjectRef] = []
        pending = refs
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=BOUND)
            assert done, "ray.wait timed out"
            ready += done
        results = ray.get(refs, timeout=BOUND)
        stats = pool.statistics()
    assert sorted(ready, key=refs.index) == refs  # every ref became ready once
    assert [r.status for r in results] == [TaskStatus.COMPLETED] * 6
    assert [r.final_message for r in results] == [f"echo: hello {i}" for i in range(6)]
    assert [r.task_id for r in results] == [h.task_id for h in handles]
    assert stats.completed == 6
    wait_until(lambda: not any(pid_alive(pid) for pid in actor_pids), "the actors ending")


def test_cancel_through_the_handle_and_through_ray_cancel(workspace: Path) -> None:
    markers = new_markers(2)
    with model_in_thread() as url, blocking_ray_pool(num_actors=2, agents_per_actor=2) as pool:
        by_handle = pool.submit(AgentTask(config(url, workspace), prompts=[long_tool(markers[0])]))
        by_ray = pool.submit(AgentTask(config(url, workspace), prompts=[long_tool(markers[1])]))
        wait_until(lambda: all(tool_pid(m) is not None for m in markers), "both remote tools starting")
        tools = tool_pids(markers)
        by_handle.cancel()
        cancelled = ray.get(by_handle.ref, timeout=BOUND)  # the ref carries the CANCELLED result
        ray.cancel(by_ray.ref)
        with pytest.raises(ray.exceptions.TaskCancelledError):
            ray.get(by_ray.ref, timeout=BOUND)
        other = by_ray.result()  # the task itself was cancelled, and its result is kept
        after = ray.get(pool.submit(AgentTask(config(url, workspace), prompts=["after"])).ref, timeout=BOUND)
    assert cancelled.status is TaskStatus.CANCELLED and isinstance(cancelled.error, TaskCancelled)
    assert other.status is TaskStatus.CANCELLED
    assert not any(pid_alive(pid) for pid in tools)
    assert after.status is TaskStatus.COMPLETED


def test_an_error_in_the_block_cancels_the_tasks_and_propagates(workspace: Path) -> None:
    [marker] = new_markers(1)
    with model_in_thread() as url, pytest.raises(LookupError, match="the caller's bug"):
        with blocking_ray_pool(num_actors=1, agents_per_actor=1) as pool:
            handle = pool.submit(AgentTask(config(url, workspace), prompts=[long_tool(marker)]))
            wait_until(lambda: tool_pid(marker) is not None, "the remote tool starting")
            tools = tool_pids([marker])
            actor_pids = [info.pid for info in pool.actors]
            actor_pids.append(ray.get(pool._results.pid.remote(), timeout=BOUND))
            raise LookupError("the caller's bug")
    assert not any(pid_alive(pid) for pid in tools)
    wait_until(lambda: not any(pid_alive(pid) for pid in actor_pids), "the actor ending")
    with pytest.raises(ray.exceptions.RayError):  # its results actor is gone with the pool
        ray.get(handle.ref, timeout=BOUND)


def test_bad_arguments_are_refused_in_the_callers_thread() -> None:
    with pytest.raises(ta.ConfigError, match="agents_per_actor must be a positive integer"):
        with blocking_ray_pool(2, 0):
            pytest.fail("started")
