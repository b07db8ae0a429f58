"""JSON-RPC behaviour on the wire: errors say what was wrong, and nothing a client sends
breaks its connection or anyone else's threads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent.testing import AppServerError

from ._harness import app_server, run_turn, start_thread, text_input


async def test_unknown_methods_get_method_not_found_and_the_connection_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        for method in ("thread/teleport", "review/start"):  # unknown, and codex-only
            error = await client.read_error(await client.send_request(method, {}))
            assert error.code == -32601
            assert repr(method) in error.message and "docs/app-server.md" in error.message
        assert await client.request("thread/loaded/list") == {"data": [], "nextCursor": None}


async def test_requests_before_initialize_are_refused_and_initialize_only_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.connect()
        error = await client.read_error(await client.send_request("thread/start", {}))
        assert error.code == -32600 and "Not initialized" in error.message
        error = await client.read_error(await client.send_request("initialize", {}))
        assert error.code == -32602 and "clientInfo" in error.message
        result = await client.initialize(name="probe", version="0.0.1")
        assert result["platformFamily"] in ("unix", "windows") and "probe" in result["userAgent"]
        error = await client.read_error(await client.send_request("initialize", {"clientInfo": {"name": "x"}}))
        assert error.code == -32600 and "Already initialized" in error.message


@pytest.mark.parametrize(
    ("method", "params", "says"),
    [
        ("thread/start", {"ephemeral": "yes"}, "`ephemeral` must be true, false or null, got 'yes'"),
        ("thread/start", {"cwd": "/nonexistent/dir"}, "`cwd` '/nonexistent/dir' is not a directory"),
        ("thread/start", {"config": {"thread_unload_delay_secs": -1}}, "thread_unload_delay_secs must be"),
        ("thread/start", {"dynamicTools": [{"description": "no name"}]}, "dynamicTools[0]: `name` must be"),
        ("thread/start", ["not", "an", "object"], "params must be a JSON object"),
        ("thread/resume", {}, "missing required field `threadId`"),
        ("turn/start", {"threadId": 7, "input": []}, "`threadId` must be a non-empty string, got 7"),
        ("thread/loaded/list", {"limit": -1}, "`limit` must be an integer >= 0"),
        ("thread/loaded/list", {"cursor": "x"}, "`cursor` 'x' is not a cursor"),
    ],
)
async def test_bad_params_get_invalid_params_saying_what_was_wrong(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, method: str, params: object, says: str
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        error = await client.read_error(await client.send_request(method, params))  # type: ignore[arg-type]
        assert error.code == -32602, error
        assert method in error.message and says in error.message


async def test_turn_params_are_checked_against_the_thread(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        cases = [
            ({"input": []}, -32602, "`input` needs at least one non-empty text item"),
            ({"input": [{"type": "skill", "name": "x", "path": "/x"}]}, -32602, "input[0] is not supported"),
            ({"input": text_input("hi"), "model": ""}, -32602, "`model` must be a model name"),
            ({"input": text_input("hi"), "effort": "maximal"}, -32602, "`effort` must be one of"),
            ({"input": text_input("hi"), "outputSchema": {"type": "string"}}, -32602, "`outputSchema` is not usable"),
        ]
        for extra, code, says in cases:
            with pytest.raises(AppServerError) as caught:
                await client.request("turn/start", {"threadId": thread_id, **extra})
            assert caught.value.code == code and says in caught.value.message
        with pytest.raises(AppServerError) as caught:
            await client.request("turn/start", {"threadId": "01a230c2-7dc6-7f80-89ae-df3d5f8ebcde",
                                                "input": text_input("hi")})
        assert caught.value.code == -32600 and "not loaded; call thread/resume first" in caught.value.message
        with pytest.raises(AppServerError) as caught:
            await client.request("turn/steer", {"threadId": thread_id, "expectedTurnId": "t",
                                                "input": text_input("hi")})
        assert caught.value.code == -32600 and "no turn is running" in caught.value.message
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/resume", {"threadId": "not-a-thread"})
        assert caught.value.code == -32600 and "not-a-thread" in caught.value.message


async def test_a_malformed_line_is_answered_and_breaks_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        bystander = await harness.client()
        thread_id = (await start_thread(bystander))["id"]
        client = await harness.client()
        await client.send_raw("this is not json")
        warning = await client.read_notification("warning")
        assert "not JSON-RPC" in warning["message"] and "not JSON" in warning["message"]
        await client.send_raw("[1, 2, 3]")
        assert "JSON object" in (await client.read_notification("warning"))["message"]
        await client.send_raw(json.dumps({"jsonrpc": "2.0", "id": 41}))
        error = await client.read_error(41)
        assert error.code == -32600 and '"method"' in error.message
        await client.send_raw(json.dumps({"jsonrpc": "1.0", "id": 42, "method": "thread/loaded/list"}))
        assert (await client.read_error(42)).code == -32600
        await client.send_raw(json.dumps({"jsonrpc": "2.0", "id": 43, "result": {}}))  # a reply nobody asked for
        # The connection and the other client's thread are unharmed.
        assert await client.request("thread/loaded/list") == {"data": [thread_id], "nextCursor": None}
        completed = await run_turn(bystander, thread_id, "still fine?")
        assert completed["turn"]["status"] == "completed"


async def test_an_oversized_message_is_discarded_and_the_connection_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client(max_message_bytes=1024)
        await client.send_raw(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"p": "x" * 5000}}))
        warning = await client.read_notification("warning")
        assert "more than 1024 bytes" in warning["message"]
        assert await client.request("thread/loaded/list") == {"data": [], "nextCursor": None}


async def test_opted_out_notifications_are_not_sent(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.connect()
        await client.initialize(capabilities={"optOutNotificationMethods": ["item/agentMessage/delta",
                                                                            "thread/started"]})
        thread_id = (await start_thread(client))["id"]
        completed = await run_turn(client, thread_id, "hello")
        assert completed["turn"]["status"] == "completed"
        assert client.pending("item/agentMessage/delta") == [] and client.pending("thread/started") == []
        assert client.pending("item/completed")
