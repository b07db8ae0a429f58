"""``Agent.statistics()``: a frozen snapshot of the agent's counters (DESIGN: Trio naming)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm


async def test_statistics_follow_the_queue_and_the_transport(server: FakeResponsesServer, workspace: Path) -> None:
    seen, release = trio.Event(), trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        seen.set()
        await release.wait()
        await conn.send_final("resp-1")
        await conn.next_request()
        await conn.send_final("resp-2")

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        first = await agent.prompt("one")
        await agent.prompt("two")
        await seen.wait()
        during = agent.statistics()
        release.set()
        await first.result()
    after = agent.statistics()
    assert (during.turns_accepted, during.turns_queued, during.running_turn) == (2, 1, 1)
    assert (during.connection_attempts, during.response_attempts, during.response_retries) == (1, 2, 0)
    assert during.history_items == 3  # permissions, context, the first prompt
    assert (after.turns_accepted, after.turns_queued, after.running_turn) == (2, 0, None)
    assert after.response_attempts == 3
    assert after.history_items == 6  # + first answer, second prompt, second answer
    assert after.session_id == "model-test"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        after.turns_accepted = 0  # type: ignore[misc]
