"""Dynamic tools: the client runs them (``item/tool/call``), its reply continues the turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.testing import AppServerError, FakeConnection, frames

from ._harness import Json, app_server, send_message, start_thread, text_input

TOOL = {"name": "lookup", "description": "Look something up.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}


def calls_lookup(arguments: Json) -> Any:
    async def reply(conn: FakeConnection, request: Json) -> None:
        outputs = [item for item in request["input"] if item.get("type") == "function_call_output"]
        if not outputs:
            call = frames.function_call("call-1", "lookup", json.dumps(arguments))
            await conn.send(frames.output_item_done(0, call))
            await conn.send(frames.completed("resp-1", [call]))
        else:
            await send_message(conn, "resp-2", f"tool said: {json.dumps(outputs[-1]['output'])}")

    return reply


async def start_turn(client: Any, thread_id: str) -> str:
    started = await client.request("turn/start", {"threadId": thread_id, "input": text_input("look it up")})
    return str(started["turn"]["id"])


async def test_the_first_reply_wins_and_the_other_clients_are_told_it_is_resolved(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, calls_lookup({"q": "x"})) as harness:
        owner = await harness.client()
        other = await harness.client()
        thread_id = (await start_thread(owner, dynamicTools=[TOOL]))["id"]
        await other.request("thread/resume", {"threadId": thread_id})
        turn_id = await start_turn(owner, thread_id)
        mine = await owner.read_server_request("item/tool/call")
        theirs = await other.read_server_request("item/tool/call")
        assert mine.params == theirs.params == {"threadId": thread_id, "turnId": turn_id, "callId": "call-1",
                                                 "namespace": None, "tool": "lookup", "arguments": {"q": "x"}}
        image = {"type": "inputImage", "imageUrl": "data:image/png;base64,AA"}
        await other.respond(theirs.id, {"contentItems": [{"type": "inputText", "text": "found"}, image],
                                        "success": True})
        resolved = await owner.read_notification("serverRequest/resolved")
        assert resolved == {"threadId": thread_id, "requestId": mine.id}
        await owner.respond(mine.id, {"contentItems": [], "success": False})  # too late: ignored
        completed = await owner.read_notification("turn/completed")
        seen = owner.take_pending()
    (item,) = [m["params"]["item"] for m in seen if m.get("method") == "item/completed"
               and m["params"]["item"]["type"] == "dynamicToolCall"]
    assert item["status"] == "completed" and item["success"] is True and item["arguments"] == {"q": "x"}
    assert item["contentItems"][0] == {"type": "inputText", "text": "found"}
    assert completed["turn"]["status"] == "completed"
    output = next(i for i in harness.model.requests[1]["input"] if i.get("type") == "function_call_output")
    assert output["output"] == [{"type": "input_text", "text": "found"},
                                {"type": "input_image", "image_url": "data:image/png;base64,AA"}]


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({"error": {"code": -32000, "message": "the tool crashed"}}, "dynamic tool lookup failed: the tool crashed"),
        ({"result": {"content": "wrong shape"}}, "is not a DynamicToolCallResponse"),
        ({"gone": True}, "went away before answering"),
    ],
)
async def test_a_failed_call_is_answered_to_the_model_and_the_turn_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, answer: Json, says: str
) -> None:
    async with app_server(tmp_path, calls_lookup({})) as harness:
        owner = await harness.client()
        helper = await harness.client()
        thread_id = (await start_thread(helper, dynamicTools=[TOOL]))["id"]
        await owner.request("thread/resume", {"threadId": thread_id})
        await start_turn(owner, thread_id)
        request = await helper.read_server_request("item/tool/call")
        if "error" in answer:
            await helper.respond_error(request.id, answer["error"]["code"], answer["error"]["message"])
        elif "result" in answer:
            await helper.respond(request.id, answer["result"])
        else:
            await owner.read_server_request("item/tool/call")  # asked too; never answers
            await helper.aclose()
            await owner.aclose()
            watcher = await harness.client()
            await watcher.request("thread/resume", {"threadId": thread_id})
            owner = watcher
        completed = await owner.read_notification("turn/completed")
    assert completed["turn"]["status"] == "completed"
    output = next(i for i in harness.model.requests[1]["input"] if i.get("type") == "function_call_output")
    assert says in json.dumps(output["output"])


async def test_a_call_with_no_subscriber_fails_at_once(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with app_server(tmp_path, calls_lookup({})) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client, dynamicTools=[TOOL]))["id"]
        await start_turn(client, thread_id)
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await harness.model.wait_for_request_count(2)
    output = next(i for i in harness.model.requests[1]["input"] if i.get("type") == "function_call_output")
    assert "no client is subscribed" in json.dumps(output["output"])


async def test_interrupting_a_turn_abandons_its_call(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with app_server(tmp_path, calls_lookup({})) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client, dynamicTools=[TOOL]))["id"]
        turn_id = await start_turn(client, thread_id)
        request = await client.read_server_request("item/tool/call")
        await client.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id})
        assert await client.read_notification("serverRequest/resolved") == {"threadId": thread_id,
                                                                           "requestId": request.id}
        completed = await client.read_notification("turn/completed")
        seen = client.take_pending("item/completed")
    assert completed["turn"]["status"] == "interrupted"
    (item,) = [m["params"]["item"] for m in seen if m["params"]["item"]["type"] == "dynamicToolCall"]
    assert item["status"] == "failed"


async def test_dynamic_tools_survive_a_cold_resume(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with app_server(tmp_path, calls_lookup({"q": "again"}), unload_delay=0) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client, dynamicTools=[TOOL]))["id"]
        await harness.model.wait_for_warmups(1)
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed")
        await client.request("thread/resume", {"threadId": thread_id})
        await start_turn(client, thread_id)
        request = await client.read_server_request("item/tool/call")
        assert request.params["tool"] == "lookup" and request.params["arguments"] == {"q": "again"}
        await client.respond(request.id, {"contentItems": [{"type": "inputText", "text": "ok"}], "success": True})
        assert (await client.read_notification("turn/completed"))["turn"]["status"] == "completed"
    resumed_warmup = [r for r in harness.model.server.requests if r.get("generate") is False][-1]
    assert "lookup" in [tool.get("name") for tool in resumed_warmup["input"][0]["tools"]]


async def test_bad_dynamic_tool_declarations_are_refused(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        for tools, says in [
            ([TOOL, TOOL], "declared twice"),
            ([{**TOOL, "name": "exec"}], "taken by a built-in tool"),
            ([{**TOOL, "name": "bad name"}], "is invalid"),
            ([{**TOOL, "type": "namespace"}], "only function tools"),
        ]:
            with pytest.raises(AppServerError) as caught:
                await client.request("thread/start", {"dynamicTools": tools})
            assert says in caught.value.message, caught.value.message
        assert (await client.request("thread/loaded/list"))["data"] == []
