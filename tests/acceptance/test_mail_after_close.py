"""Mail to an agent that can no longer read it raises ``AgentClosed`` (issue 21, item 8).

README: "Mail to an agent that has closed raises ``ta.AgentClosed``". Before the fix,
``agent.post_mail`` on a closed agent put the mail in a mailbox nobody reads and
returned None, as if it had been queued. While the block is closing and a turn still
runs, mail is still taken: that turn's next request carries it (the positive control).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm


def _agent_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in body["input"] if item.get("type") == "agent_message"]


async def test_mail_to_a_closed_agent_raises_agent_closed(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "read it")

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        assert await agent.post_mail("/root/worker", "while open") is None  # queue-only: taken
        await (await agent.prompt("go")).result()
    for trigger in (False, True):
        with pytest.raises(ta.AgentClosed, match="agent /root has closed; mail to it cannot be delivered"):
            await agent.post_mail("/root/worker", "too late", trigger_turn=trigger)


async def test_mail_while_the_block_closes_joins_the_turn_still_running(
    server: FakeResponsesServer, workspace: Path
) -> None:
    tool_started = trio.Event()
    posted: list[ta.Turn | None] = []
    follow_up: list[dict[str, Any]] = []
    agents: list[ta.Agent] = []

    async def hold(ctx: ta.ToolContext, args: Any) -> str:
        tool_started.set()
        await trio.testing.wait_all_tasks_blocked()  # the block's exit is waiting for this turn
        assert agents[0].closing
        posted.append(await agents[0].post_mail("/root/worker", "just in time"))
        return "held"

    tools = ta.Tools.default().function("hold", "Holds the turn.", {"type": "object"}, hold)

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "hold", {})
        follow_up.append(await conn.next_request())
        await conn.send_final("resp-2")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            agents.append(agent)
            turn = await agent.prompt("hold on")
            await tool_started.wait()
        await turn.result()
    assert posted == [None]
    assert [m["author"] for m in _agent_messages(follow_up[0])] == ["/root/worker"]
