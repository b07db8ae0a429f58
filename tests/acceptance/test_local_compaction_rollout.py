"""A local compaction in the rollout (issue 23, item 3): one ``compacted`` line, the
line the Codex CLI writes for its own local compaction -- ``message`` is the summary
bridge text, ``replacement_history`` the whole new history -- which both our
``load_session`` and codex's resume read as "replace everything before me" (the codex
facts are in /work/shared/reference/codex-rollout/REPORT.md, sec. 3.5 and 5). The
session resumes from it: the resumed agent's first request replays exactly that
history. Also the built-in local model, which answers a summarization request with a
deterministic summary, and (started with ``remote_compaction=True``) a trigger with a
compaction item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

import trio_agent as ta
from trio_agent._local_model import serve_local_model
from trio_agent._session.summary import SUMMARY_PREFIX
from trio_agent._wire.request import wire_item
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm

Json = dict[str, Any]
# Content part types codex's resume keeps (REPORT sec. 3.6: a message with another part
# type is dropped whole).
CODEX_PART_TYPES = {"input_text", "output_text", "input_image"}


def rollout_lines(path: Path) -> list[Json]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_codex_reads(line: Json) -> None:
    """The shape codex's resume reads a ``compacted`` line in: a string envelope
    timestamp, ``message`` a string, ``replacement_history`` a list of Responses items of
    known shapes (messages with known part types)."""
    assert isinstance(line["timestamp"], str) and line["timestamp"]
    payload = line["payload"]
    assert isinstance(payload["message"], str) and isinstance(payload["replacement_history"], list)
    for item in payload["replacement_history"]:
        assert item["type"] == "message" and item["role"] in ("user", "developer"), item
        assert item["content"] and {part["type"] for part in item["content"]} <= CODEX_PART_TYPES, item


async def test_a_local_compaction_is_one_codex_compacted_line_and_the_session_resumes_from_it(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    resumed_request: list[Json] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "first answer")
        assert frames.is_compaction_request(await conn.next_request())
        await conn.send_final("resp-declined", "no such thing")
        assert frames.is_summarization_request(await conn.next_request())
        await conn.send_final("resp-summary", "THE SUMMARY")
        await conn.next_request()
        await conn.send_final("resp-2", "second answer")
        again = await server.accept()
        resumed_request.append(await again.next_request())
        await again.send_final("resp-resumed", "resumed answer")

    config = make_config(server, workspace, rollout=ta.RolloutConfig(home))
    async with scripted(script, 30):
        async with ta.open_agent(config) as agent:
            await (await agent.prompt("first prompt")).result()
            await (await agent.compact()).result()
            second = await (await agent.prompt("second prompt")).result()
            assert agent.rollout is not None
            path = agent.rollout.path
        live = second.snapshot().history
        lines = rollout_lines(path)
        compacted = [line for line in lines if line["type"] == "compacted"]
        (line,) = compacted
        assert_codex_reads(line)
        payload = line["payload"]
        assert payload["message"] == f"{SUMMARY_PREFIX}\nTHE SUMMARY"
        assert payload["trio_agent_reason"] == "compaction"
        texts = [part["text"] for item in payload["replacement_history"] for part in item["content"]]
        assert texts[0].startswith("<permissions instructions>") and texts[1].startswith("<environment_context>")
        assert texts[2:] == ["first prompt", payload["message"]]
        assert "first answer" not in json.dumps(payload) and "no such thing" not in json.dumps(payload)
        after = [item["payload"] for item in lines[lines.index(line) + 1:] if item["type"] == "response_item"]
        assert payload["replacement_history"] + after == live  # what codex and we both rebuild
        durable = ta.RolloutConfig(home).load_session("model-test")
        assert durable.snapshot.history == live
        thread, snapshot, rollout = durable.into_parts()
        resumed = make_config(server, workspace, session_id=thread, resume=snapshot, rollout=rollout)
        async with ta.open_agent(resumed) as again:
            assert (await (await again.prompt("continue")).result()).final_message == "resumed answer"
    (body,) = resumed_request
    sent = body["input"][2:-1]  # after the two prefix items, before the new prompt
    assert sent == [wire_item(item) for item in live]
    assert body["input"][-1]["content"][0]["text"] == "continue"


async def test_the_local_model_summarizes_deterministically(workspace: Path) -> None:
    log = EventLog()
    async with trio.open_nursery() as nursery:
        model = await nursery.start(serve_local_model)
        config = ta.AgentConfig(auth="local", workspace=workspace, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                          websocket_url=model.url))
        with trio.fail_after(30):
            async with ta.open_agent(config) as agent:
                nursery.start_soon(log.consume, agent.events)
                await (await agent.prompt("remember the number 42")).result()
                await (await agent.prompt("and the colour blue")).result()
                await (await agent.compact()).result()
                answer = (await (await agent.prompt("what was it?")).result()).final_message
        nursery.cancel_scope.cancel()
    (fallback,) = log.payloads("model.compaction.fallback")
    assert fallback["reason"] == "no_compaction_item"
    (completed,) = log.payloads("model.compaction.completed")
    assert completed["mode"] == "local"
    assert "what was it?" in answer
    summaries = [p for p in log.payloads("api.event") if p["phase"] == "compaction" and p["direction"] == "inbound"
                 and p["event"].get("type") == "response.completed"]
    texts = [item["content"][0]["text"] for p in summaries for item in p["event"]["response"]["output"]]
    assert texts[-1] == ("Summary by trio_agent's local scripted model: the user sent 2 message(s): "
                         "'remember the number 42'; 'and the colour blue'. Each was answered; nothing is pending.")


async def test_the_local_model_can_offer_remote_compaction(workspace: Path) -> None:
    log = EventLog()
    async with trio.open_nursery() as nursery:
        model = await nursery.start(lambda task_status: serve_local_model(remote_compaction=True,
                                                                          task_status=task_status))
        config = ta.AgentConfig(auth="local", workspace=workspace, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                          websocket_url=model.url))
        with trio.fail_after(30):
            async with ta.open_agent(config) as agent:
                nursery.start_soon(log.consume, agent.events)
                await (await agent.prompt("remember 7")).result()
                await (await agent.compact()).result()
                await (await agent.prompt("go on")).result()
        nursery.cancel_scope.cancel()
    assert not log.payloads("model.compaction.fallback")
    (completed,) = log.payloads("model.compaction.completed")
    assert completed["mode"] == "remote"
    sent = [p["event"] for p in log.payloads("api.event") if p["direction"] == "outbound"]
    compaction = [item for item in sent[-1]["input"] if item.get("type") == "compaction"]
    assert [item["encrypted_content"] for item in compaction] == [
        "local:Summary by trio_agent's local scripted model: the user sent 1 message(s): 'remember 7'. "
        "Each was answered; nothing is pending."]
