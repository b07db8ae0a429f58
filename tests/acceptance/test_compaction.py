"""Compaction ports (nanocodex ``sol_compacts_*``) over the real WebSocket path."""

from __future__ import annotations

import json
from pathlib import Path

import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import events_of, make_config, run_model, scripted, warm

COMPACTION_DONE = {
    "type": "response.output_item.done",
    "item": {"id": "cmp-server-id", "type": "compaction", "encrypted_content": "opaque-summary"},
}


async def test_compacts_with_a_trigger_and_installs_the_returned_context(
    server: FakeResponsesServer, workspace: Path
) -> None:
    source = (
        'await tools.apply_patch("*** Begin Patch\\n*** Add File: AGENTS.md\\n+fresh compacted instructions\\n'
        '*** End Patch"); text("tool completed")'
    )

    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        call = frames.custom_tool_call("call-exec", "exec", source, item_id="item-exec")
        await conn.send(frames.completed("resp-tool", [call], usage_block=frames.usage(372_001)))
        compact = await conn.next_request()
        assert compact["previous_response_id"] == "resp-tool"
        output, trigger = compact["input"]
        assert output["type"] == "custom_tool_call_output" and "tool completed" in json.dumps(output["output"])
        assert trigger == {"type": "compaction_trigger"}
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
        continuation = await conn.next_request()
        assert "previous_response_id" not in continuation
        items = continuation["input"]
        assert len(items) == 6
        assert items[0]["type"] == "additional_tools"
        assert [items[i]["role"] for i in (1, 2, 3, 4)] == ["developer", "developer", "user", "user"]
        assert items[5]["type"] == "compaction" and items[5]["encrypted_content"] == "opaque-summary"
        assert "id" not in items[5]
        text = json.dumps(continuation)
        assert "exercise compaction" in text
        assert "fresh compacted instructions" in text  # AGENTS.md re-read when context is rebuilt
        assert "tool completed" not in text
        await conn.send_final("resp-final")

    async with scripted(script):
        output = await run_model(server, workspace, "exercise compaction")
    (started,) = events_of(output, "model.compaction.started")
    assert started["after_model_call_index"] == 1
    assert started["previous_response_id"] == "resp-tool"
    (compacted,) = events_of(output, "model.compaction.completed")
    assert (compacted["response_id"], compacted["status"]) == ("resp-compact", "completed")
    (completed,) = events_of(output, "run.completed")
    assert completed["compactions"] == 1


async def test_compacts_before_sampling_a_follow_on_turn(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        first = await conn.next_request()
        assert "first prompt" in json.dumps(first)
        await conn.send(frames.completed("resp-first", [frames.assistant_message("done")],
                                         usage_block=frames.usage(244_800)))
        compact = await conn.next_request()
        assert compact["previous_response_id"] == "resp-first"
        assert compact["input"] == [{"type": "compaction_trigger"}]
        assert "second prompt" not in json.dumps(compact)
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
        second = await conn.next_request()
        assert "previous_response_id" not in second
        assert second["input"][-2] == {"type": "compaction", "encrypted_content": "opaque-summary"}
        assert "second prompt" in json.dumps(second["input"][-1])
        await conn.send_final("resp-second")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            assert (await (await agent.prompt("first prompt")).result()).final_message == "done"
            assert (await (await agent.prompt("second prompt")).result()).final_message == "done"


async def test_a_compaction_without_exactly_one_item_fails_the_turn_clearly(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.completed("resp-first", [frames.assistant_message("done")],
                                         usage_block=frames.usage(250_000)))
        await conn.next_request()  # the compaction request
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(10)))

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            await (await agent.prompt("first")).result()
            turn = await agent.prompt("second")
            try:
                await turn.result()
                raise AssertionError("the turn should have failed")
            except ta.TurnFailed as exc:
                assert "expected exactly one" in str(exc)


async def test_a_steer_during_compaction_is_sent_after_it_exactly_once(
    server: FakeResponsesServer, workspace: Path
) -> None:
    compacting = trio.Event()
    steered = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        call = frames.custom_tool_call("call-1", "exec", 'text("big result")')
        await conn.send(frames.completed("resp-tool", [call], usage_block=frames.usage(250_000)))
        compact = await conn.next_request()
        assert compact["input"][-1] == {"type": "compaction_trigger"}
        assert "steer during compaction" not in json.dumps(compact)
        compacting.set()
        await steered.wait()
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(100)))
        continuation = await conn.next_request()
        assert json.dumps(continuation).count("steer during compaction") == 1
        assert continuation["input"][-1]["content"][0]["text"] == "steer during compaction"
        await conn.send_final("resp-final")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            turn = await agent.prompt("work")
            await compacting.wait()
            await turn.steer("steer during compaction", interrupt=True)
            steered.set()
            assert (await turn.result()).final_message == "done"
