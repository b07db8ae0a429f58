"""trio_agent.ray's public surface: pinned names, final handles, values that pickle."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

import ray.cloudpickle

import trio_agent as ta
import trio_agent.ray as tr

EXPECTED_ALL = [
    "ActorInfo",
    "ActorLost",
    "ActorStatistics",
    "AgentTask",
    "BlockingRayPool",
    "PoolClosed",
    "PoolStatistics",
    "RayPool",
    "RemoteTask",
    "TaskBody",
    "TaskCancelled",
    "TaskCrashed",
    "TaskEvent",
    "TaskRef",
    "TaskResult",
    "TaskStatus",
    "blocking_ray_pool",
    "open_ray_pool",
]


def test_all_is_pinned_and_names_report_the_package() -> None:
    assert tr.__all__ == EXPECTED_ALL
    for name in EXPECTED_ALL:
        value = getattr(tr, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == "trio_agent.ray", name


def test_handles_and_values_are_final() -> None:
    for cls in (tr.RayPool, tr.RemoteTask, tr.BlockingRayPool, tr.TaskRef, tr.AgentTask, tr.TaskResult,
                tr.TaskEvent, tr.ActorInfo, tr.ActorStatistics, tr.PoolStatistics):
        assert getattr(cls, "__final__", False), cls


def test_errors_are_agent_errors_that_keep_their_fields_across_processes() -> None:
    lost = tr.ActorLost("gone", actor=1, session_id="s-1")
    crashed = tr.TaskCrashed("boom", exception_type="KeyError", traceback="tb")
    for error in (lost, crashed, tr.TaskCancelled("c"), tr.PoolClosed("p")):
        assert isinstance(error, ta.AgentError)
    copy = pickle.loads(pickle.dumps(lost))
    assert (str(copy), copy.actor, copy.session_id) == ("gone", 1, "s-1")
    copy_crash = pickle.loads(pickle.dumps(crashed))
    assert (copy_crash.exception_type, copy_crash.traceback) == ("KeyError", "tb")


async def _body(agent: ta.Agent) -> None:
    return None


def test_tasks_and_results_pickle_as_themselves(tmp_path: Path) -> None:
    config = ta.AgentConfig(auth="test-key", workspace=tmp_path, rollout=ta.RolloutConfig(tmp_path / "home"))
    task = tr.AgentTask(config, body=_body)
    copy = pickle.loads(ray.cloudpickle.dumps(task))
    assert (copy.task_id, copy.config.session_id, copy.body) == (task.task_id, config.session_id, _body)
    result = tr.TaskResult("t", "s", tr.TaskStatus.FAILED, error=tr.TaskCancelled("why"), rollout_path=tmp_path)
    again = pickle.loads(pickle.dumps(result))
    assert again.status is tr.TaskStatus.FAILED and str(again.error) == "why" and again.final_message is None
    assert [status.is_terminal for status in tr.TaskStatus] == [False, False, True, True, True, True]
