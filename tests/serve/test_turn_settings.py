"""``turn/start``'s ``outputSchema`` (this turn's final message, as Responses
``text.format``) and ``model`` (this turn and the later ones, kept for a cold
resume), as the schema's ``TurnStartParams`` doc strings define them. Every request
sent here is checked against ``TurnStartParams``, every server message against the
schema (the harness's client)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.testing import AppServerClient, AppServerError

from ._harness import Json, app_server, start_thread, text_input
from ._schema import check

SCHEMA: Json = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                "additionalProperties": False}


async def start(client: AppServerClient, thread_id: str, text: str, **params: Any) -> Json:
    """``turn/start`` (its params schema-checked first); the ``turn/completed`` params."""
    request = {"threadId": thread_id, "input": text_input(text), **params}
    check("#/definitions/v2/TurnStartParams", request, "turn/start params")
    started = await client.request("turn/start", request)
    turn_id = started["turn"]["id"]
    return await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)


async def test_an_output_schema_constrains_that_turn_only(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def json_when_asked(conn: Any, request: Json) -> None:
        from ._harness import send_message

        structured = "format" in request["text"]
        await send_message(conn, f"resp-{len(conn.requests)}", '{"a":"x"}' if structured else "plain")

    async with app_server(tmp_path, json_when_asked) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        client.take_pending()
        first = await start(client, thread_id, "give json", outputSchema=SCHEMA)
        messages = [m["params"]["item"]["text"] for m in client.take_pending("item/completed")
                    if m["params"]["item"]["type"] == "agentMessage"]
        second = await start(client, thread_id, "now text")
    assert first["turn"]["status"] == second["turn"]["status"] == "completed"
    assert messages == ['{"a":"x"}'] and json.loads(messages[0]) == {"a": "x"}
    structured, plain = harness.model.requests
    assert structured["text"] == {"verbosity": "low", "format": {
        "type": "json_schema", "name": "codex_output_schema", "schema": SCHEMA, "strict": True}}
    assert plain["text"] == {"verbosity": "low"}


async def test_a_turns_model_applies_to_it_and_the_turns_after_also_after_a_cold_resume(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]  # "mock-model"
        await start(client, thread_id, "one")
        await start(client, thread_id, "two", model="other-model", effort="high")
        await start(client, thread_id, "three")
        warm = await client.request("thread/resume", {"threadId": thread_id})
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed")
        listed = await client.request("thread/read", {"threadId": thread_id})
        cold = await client.request("thread/resume", {"threadId": thread_id})
        await start(client, thread_id, "four")
    assert [(r["model"], r["reasoning"]["effort"]) for r in harness.model.requests] == [
        ("mock-model", "low"), ("other-model", "high"), ("other-model", "high"), ("other-model", "low")]
    assert warm["model"] == cold["model"] == listed["thread"]["model"] == "other-model"


@pytest.mark.parametrize(("extra", "says"), [
    pytest.param({"outputSchema": {"type": "array", "items": {"type": "string"}}},
                 "`outputSchema` is not usable: an output schema's root must be an object schema", id="array-root"),
    pytest.param({"outputSchema": "an object please"}, "must be a JSON Schema object (a dict)", id="not-a-schema"),
    pytest.param({"outputSchema": {}}, 'root must be an object schema ("type": "object"), got no type', id="empty"),
    pytest.param({"model": "  "}, "`model` must be a model name", id="blank-model"),
])
async def test_unusable_settings_are_refused_and_change_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, extra: Json, says: str
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        with pytest.raises(AppServerError) as caught:
            await client.request("turn/start", {"threadId": thread_id, "input": text_input("hi"),
                                                "effort": "high", **extra})
        assert caught.value.code == -32602 and "turn/start" in caught.value.message and says in caught.value.message
        await start(client, thread_id, "fine")
    (request,) = harness.model.requests  # the refused turn/start sent nothing and set nothing
    assert request["model"] == "mock-model" and request["reasoning"]["effort"] == "low"
    assert "format" not in request["text"]
