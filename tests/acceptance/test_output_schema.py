"""Structured output (``prompt(output_schema=...)``) and a per-turn model
(``set_model``) on the wire, over the WebSocket and the HTTPS/SSE transport: the
schema is ``text.format`` in each generation request of its turn and in no other
request; the model is the one current when the turn was accepted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm
from .test_conformance import TRANSPORTS, Peer

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                          "additionalProperties": False}
FORMAT = {"type": "json_schema", "name": "codex_output_schema", "schema": SCHEMA, "strict": True}


@pytest.fixture(params=TRANSPORTS, ids=["websocket", "https"])
def peer(request: pytest.FixtureRequest, server: FakeResponsesServer) -> Peer:
    return Peer(server, request.param)


async def test_the_schema_is_sent_with_its_turns_requests_only(peer: Peer, workspace: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def script() -> None:
        first = await peer.next_request()  # the structured turn: a tool call, then the answer
        seen.append(first)
        await peer.reply([frames.completed("resp-1", [frames.custom_tool_call("call-1", "exec", "text(1)")])])
        seen.append(await peer.next_request())
        await peer.reply([frames.completed("resp-2", [frames.assistant_message('{"a":"x"}')])])
        seen.append(await peer.next_request())  # the next turn: plain text again
        await peer.reply([frames.completed("resp-3", [frames.assistant_message("plain")])])

    log = EventLog()
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(peer.config(workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            structured = await (await agent.prompt("give json", output_schema=SCHEMA)).result()
            plain = await (await agent.prompt("and now text")).result()
    assert [request["text"] for request in seen] == [{"verbosity": "low", "format": FORMAT}] * 2 + [
        {"verbosity": "low"}]
    assert structured.final_message == '{"a":"x"}' and json.loads(structured.final_message) == {"a": "x"}
    assert plain.final_message == "plain"
    sent = [p["event"] for p in log.payloads("api.event") if p["direction"] == "outbound"]
    assert [body["text"].get("format") for body in sent] == ([None] if peer.transport is ta.Transport.WEBSOCKET
                                                              else []) + [FORMAT, FORMAT, None]  # warmup first


async def test_an_answer_that_ignores_the_schema_is_the_final_message_all_the_same(
    server: FakeResponsesServer, workspace: Path
) -> None:
    # The server, not the runtime, enforces the schema: whatever it answers is data.
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.completed("resp-1", [frames.assistant_message("not json {")]))

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        result = await (await agent.prompt("json please", output_schema=SCHEMA)).result()
    assert result.final_message == "not json {"
    assert [p["status"] for p in log.payloads("run.completed")] == ["completed"]


async def test_set_model_applies_to_prompts_accepted_after_it(peer: Peer, workspace: Path) -> None:
    models: list[str] = []

    async def script() -> None:
        for index in range(3):
            models.append((await peer.next_request())["model"])
            await peer.reply([frames.completed(f"resp-{index}", [frames.assistant_message("ok")])])

    log = EventLog()
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(peer.config(workspace, model="gpt-5.5")) as agent:
            nursery.start_soon(log.consume, agent.events)
            first = await agent.prompt("one")
            await agent.set_model("gpt-5.4")  # the queued first turn keeps its model
            assert agent.model == "gpt-5.4"
            second = await agent.prompt("two")
            for turn in (first, second, await agent.prompt("three")):
                await turn.result()
    assert models == ["gpt-5.5", "gpt-5.4", "gpt-5.4"]
    assert [p["model"] for p in log.payloads("run.started")] == models
    assert [p["model"] for p in log.payloads("run.completed")] == models


async def test_a_fork_starts_with_the_current_model(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        assert (await conn.next_request())["model"] == "gpt-5.4"
        await conn.send_final("resp-1")
        branch = await server.accept()  # the fork's own connection, no warmup
        assert (await branch.next_request())["model"] == "gpt-5.4"
        await branch.send_final("resp-2")

    async with scripted(script), ta.open_agent(make_config(server, workspace, model="gpt-5.5")) as agent:
        await agent.set_model("gpt-5.4")
        await (await agent.prompt("one")).result()
        async with agent.fork() as branch:
            assert branch.model == "gpt-5.4"
            await (await branch.prompt("two")).result()
    with pytest.raises(ta.ConfigError, match="non-empty string"):
        await agent.set_model("")


async def test_a_compaction_request_of_a_structured_turn_carries_no_schema(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["text"]["format"] == FORMAT
        call = frames.custom_tool_call("call-exec", "exec", "text(1)")
        await conn.send(frames.completed("resp-tool", [call], usage_block=frames.usage(372_001)))
        compact = await conn.next_request()
        assert compact["input"][-1] == {"type": "compaction_trigger"} and compact["text"] == {"verbosity": "low"}
        await conn.send({"type": "response.output_item.done",
                         "item": {"id": "cmp", "type": "compaction", "encrypted_content": "summary"}})
        await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
        continuation = await conn.next_request()
        assert continuation["text"]["format"] == FORMAT  # the turn goes on, still structured
        await conn.send(frames.completed("resp-final", [frames.assistant_message('{"a":"y"}')]))

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        result = await (await agent.prompt("go", output_schema=ta.OutputSchema(SCHEMA))).result()
    assert result.final_message == '{"a":"y"}'


@pytest.mark.parametrize(("given", "message"), [
    pytest.param(["not", "a", "dict"], "must be a JSON Schema object (a dict)", id="list"),
    pytest.param({"type": "array", "items": {}}, 'root must be an object schema ("type": "object"), got "array"',
                 id="array-root"),
    pytest.param({"properties": {}}, "got no type", id="no-type"),
    pytest.param({"type": "object", "default": float("nan")}, "must be plain JSON data", id="nan"),
    pytest.param(ta.OutputSchema, "name must be 1-64 letters", id="bad-name"),
])
async def test_a_bad_schema_is_refused_before_anything_is_queued(
    server: FakeResponsesServer, workspace: Path, given: Any, message: str
) -> None:
    async with ta.open_agent(make_config(server, workspace, responses=ta.Responses(
            profile=ta.Profile.OPENAI,
            transport=ta.Transport.HTTPS, api_base_url=server.http_base_url))) as agent:
        with pytest.raises(ta.ConfigError, match="output schema") as caught:
            if given is ta.OutputSchema:
                ta.OutputSchema(SCHEMA, name="has space")
            else:
                await agent.prompt("go", output_schema=given)
        assert message in str(caught.value)
        assert agent.statistics().turns_accepted == 0
        await trio.lowlevel.checkpoint()


def test_output_schemas_are_values_with_a_private_copy() -> None:
    given = {"type": "object", "properties": {"a": {"type": "string"}}}
    schema = ta.OutputSchema(given, strict=False)
    given["properties"] = {}
    assert schema.schema == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert schema == ta.OutputSchema({"properties": {"a": {"type": "string"}}, "type": "object"}, strict=False)
    assert schema != ta.OutputSchema(schema.schema) and len({schema, ta.OutputSchema(schema.schema)}) == 2
    assert schema.text_format() == {"type": "json_schema", "name": "codex_output_schema", "schema": schema.schema,
                                    "strict": False}
    with pytest.raises(ta.ConfigError, match="strict must be True or False"):
        ta.OutputSchema(given, strict="yes")  # type: ignore[arg-type]
