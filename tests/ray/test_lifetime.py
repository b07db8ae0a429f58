"""The pool's own lifetime: nothing outlives its block, whichever way the block ends."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent.ray import AgentTask, TaskEvent, TaskStatus, open_ray_pool
from trio_agent.testing import FakeResponsesServer

from ._facts import alive, long_tool, new_markers, tool_pids, tools_running, wait_for

pytestmark = pytest.mark.usefixtures("ray_cluster")


def long_task(model: FakeResponsesServer, workspace: Path, marker: int) -> AgentTask:
    config = ta.AgentConfig(auth="test-key", workspace=workspace, thinking=ta.Thinking.LOW,
                            responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=model.url))
    return AgentTask(config, prompts=[long_tool(marker)])


async def test_cancelling_the_scope_around_the_pool_ends_every_agent_then_every_actor(
    model: FakeResponsesServer, workspace: Path, nursery: trio.Nursery
) -> None:
    send, receive = trio.open_memory_channel[TaskEvent](1000)
    markers = new_markers(4)
    handles = []
    with trio.fail_after(120):
        with trio.CancelScope() as scope:
            async with open_ray_pool(num_actors=2, agents_per_actor=2) as pool:
                actor_pids = [info.pid for info in pool.actors]
                for marker in markers:
                    handles.append(await pool.start(long_task(model, workspace, marker), events=send))
                await wait_for(tools_running(markers), "every remote tool starting")
                pids = tool_pids(markers)
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
    assert alive(pids) == []
    assert [(await h.result()).status for h in handles] == [TaskStatus.CANCELLED] * 4
    await wait_for(lambda: not alive(actor_pids), "the actors being killed")
    send.close()
    terminal: dict[str, list[str]] = collections.defaultdict(list)
    async for item in receive:
        if item.event.kind.is_terminal:
            terminal[item.task_id].append(item.event.payload["status"])
    assert terminal == {h.task_id: ["cancelled"] for h in handles}


async def test_an_error_in_the_block_cancels_the_tasks_and_propagates_as_itself(
    model: FakeResponsesServer, workspace: Path
) -> None:
    [marker] = new_markers(1)
    with trio.fail_after(120), pytest.raises(LookupError, match="the caller's bug"):
        async with open_ray_pool(num_actors=1, agents_per_actor=2) as pool:
            handle = await pool.start(long_task(model, workspace, marker))
            await wait_for(tools_running([marker]), "the remote tool starting")
            pids = tool_pids([marker])
            raise LookupError("the caller's bug")
    assert alive(pids) == []
    result = await handle.result()
    assert result.status is TaskStatus.CANCELLED and result.turns == ()
