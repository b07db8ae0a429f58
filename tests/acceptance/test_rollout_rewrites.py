"""A rollout written across a history rewrite loads to exactly the live history (issue 7, bug 1).

Compaction replaces history with a shorter list, and a response bigger than the
whole window first truncates tool outputs; both are recorded in the rollout as
``compacted`` lines carrying the replacement history, so ``load_session`` never
resumes a history that did not exist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import make_config, scripted, warm

COMPACTION_DONE = {
    "type": "response.output_item.done",
    "item": {"id": "cmp-server-id", "type": "compaction", "encrypted_content": "opaque-summary"},
}


def rollout_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_pre_turn_compaction_is_recorded_and_the_rollout_loads_to_the_live_history(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.completed("resp-first", [frames.assistant_message("first answer")],
                                         usage_block=frames.usage(244_800)))
        compact = await conn.next_request()
        assert compact["input"] == [{"type": "compaction_trigger"}]
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
        await conn.next_request()
        await conn.send_final("resp-second", "second answer")

    config = make_config(server, workspace, rollout=ta.RolloutConfig(home))
    async with scripted(script), ta.open_agent(config) as agent:
        await (await agent.prompt("first prompt")).result()
        second = await (await agent.prompt("second prompt")).result()
        assert agent.rollout is not None
        path = agent.rollout.path
    live = second.snapshot().history
    assert [item.get("type") for item in live][-3:] == ["compaction", "message", "message"]
    loaded = ta.RolloutConfig(home).load_session("model-test").snapshot.history
    assert loaded == live
    lines = rollout_lines(path)
    kinds = [line["type"] for line in lines]
    assert kinds.count("compacted") == 1
    compacted = lines[kinds.index("compacted")]["payload"]
    assert compacted["message"] == ""
    # The replacement history is what the compaction installed; the second prompt and
    # its answer follow as ordinary items.
    after = [line["payload"] for line in lines[kinds.index("compacted") + 1:] if line["type"] == "response_item"]
    assert compacted["replacement_history"] + after == live
    assert [part["text"] for item in after for part in item["content"]] == ["second prompt", "second answer"]


async def test_truncation_and_mid_turn_compaction_load_to_the_live_history_and_resume_from_it(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    replayed: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        call = frames.function_call("call-huge", "huge", "{}", item_id="item-huge")
        await conn.send(frames.completed("resp-tool", [call], usage_block=frames.usage(372_001)))
        compact = await conn.next_request()
        output, trigger = compact["input"]
        assert output["output"] == "Output exceeded the available model context and was truncated"
        assert trigger == {"type": "compaction_trigger"}
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
        await conn.next_request()
        await conn.send_final("resp-final", "all done")
        resumed = await server.accept()
        replayed.append(await resumed.next_request())
        await resumed.send_final("resp-resumed")

    async def huge(ctx: ta.ToolContext, args: Any) -> str:
        return "x" * 1_200_000  # more than the whole 272,000-token window on its own

    tools = ta.Tools.default().function("huge", "A huge output.", {"type": "object"}, huge)
    config = make_config(server, workspace, rollout=ta.RolloutConfig(home), tools=tools)
    async with scripted(script, 30):
        async with ta.open_agent(config) as agent:
            result = await (await agent.prompt("make a huge output")).result()
            assert agent.rollout is not None
            path = agent.rollout.path
        reasons = [line["payload"]["trio_agent_reason"] for line in rollout_lines(path) if line["type"] == "compacted"]
        assert reasons == ["truncation", "compaction"]
        durable = ta.RolloutConfig(home).load_session("model-test")
        assert durable.snapshot.history == result.snapshot().history
        thread, snapshot, rollout = durable.into_parts()
        resumed = make_config(server, workspace, session_id=thread, resume=snapshot, rollout=rollout, tools=tools)
        async with ta.open_agent(resumed) as again:
            await (await again.prompt("continue")).result()
    (body,) = replayed
    sent_history = body["input"][2:-1]  # after the two prefix items, before the new prompt
    assert [item.get("type") for item in sent_history] == [item.get("type") for item in durable.snapshot.history]
    assert body["input"][-1]["content"][0]["text"] == "continue"
    # Resuming appended to the same file without re-writing what it already held.
    after_resume = ta.RolloutConfig(home).load_session("model-test").snapshot.history
    assert after_resume[: len(durable.snapshot.history)] == durable.snapshot.history
    assert [line["type"] for line in rollout_lines(path)].count("compacted") == 2
