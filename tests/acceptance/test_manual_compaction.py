"""``Agent.compact()``: compaction now, as a turn of its own (FIFO with the prompts).

Between turns it sends ``[compaction_trigger]`` chained on the last response, installs
the summary and the next turn replays the compacted history in full; it takes no
steers; queued behind a running turn it waits for it; a failed compaction leaves
history as it was; a cancelled one leaves no ``<turn_aborted>`` marker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm
from .test_compaction import COMPACTION_DONE


async def test_compact_between_turns_replays_the_summary_next(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.completed("resp-1", [frames.assistant_message("first answer")],
                                         usage_block=frames.usage(1_000)))  # far below the limit
        compact = await conn.next_request()
        assert compact["previous_response_id"] == "resp-1" and compact["input"] == [{"type": "compaction_trigger"}]
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
        after = await conn.next_request()
        assert "previous_response_id" not in after  # a full replay of the compacted history
        assert after["input"][-2]["type"] == "compaction" and "first answer" not in json.dumps(after)
        assert after["input"][-1]["content"][0]["text"] == "second prompt"
        await conn.send_final("resp-2", "second answer")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("first prompt")).result()
        compaction = await agent.compact()
        result = await compaction.result()
        assert result.final_message == "" and result.response_id == "resp-compact"
        assert (await (await agent.prompt("second prompt")).result()).final_message == "second answer"
    terminal = [p for p in log.payloads("run.completed")]
    assert [p["compactions"] for p in terminal] == [0, 1, 0]
    assert len(log.payloads("model.compaction.completed")) == 1


async def test_a_compaction_queued_behind_a_turn_waits_and_takes_no_steer(
    server: FakeResponsesServer, workspace: Path
) -> None:
    release = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await release.wait()
        await conn.send_final("resp-1", "answer")
        compact = await conn.next_request()
        assert compact["input"] == [{"type": "compaction_trigger"}]
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed("resp-compact", []))

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        first = await agent.prompt("work")
        await first.wait_running()
        compaction = await agent.compact()
        assert compaction.status is ta.TurnStatus.QUEUED
        release.set()
        assert await compaction.wait_running()
        with pytest.raises(ta.TurnNotSteerable):
            await compaction.steer("not now")
        await compaction.result()
        assert (await first.result()).final_message == "answer"


async def test_a_failed_compaction_leaves_history_as_it_was(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "kept")
        await conn.next_request()
        await conn.send({"type": "response.failed", "response": {"id": "resp-x", "error": {
            "code": "invalid_request_error", "message": "no compaction today"}}})

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        await (await agent.prompt("hello")).result()
        before = agent.statistics().history_items
        with pytest.raises(ta.TurnFailed, match="no compaction today"):
            await (await agent.compact()).result()
        assert agent.statistics().history_items == before


async def test_a_cancelled_compaction_marks_nothing_aborted(server: FakeResponsesServer, workspace: Path) -> None:
    asked = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "kept")
        await conn.next_request()
        asked.set()
        with pytest.raises(ClientDisconnected):  # the cancelled turn drops its socket
            await conn.next_request()

    async with scripted(script, 10), ta.open_agent(make_config(server, workspace)) as agent:
        await (await agent.prompt("hello")).result()
        before = agent.statistics().history_items
        compaction = await agent.compact()
        await asked.wait()
        await compaction.cancel()
        with pytest.raises(ta.TurnCancelled):
            await compaction.result()
        assert agent.statistics().history_items == before  # no <turn_aborted>, nothing else
