"""No client message ends ``trio-agent serve`` (issue 21, hole 7): one deeply nested
JSON message (``'[' * 100000``) raised ``RecursionError`` out of ``_jsonrpc.parse`` and
ended the server on stdio and over WebSocket, dropping every client and turn.

Every failure of one message is its own: answered (``-32700``/``-32600`` with the id
when it is readable, ``-32602`` for params of the wrong type) or a ``warning``; a bug
met while serving one client is that request's ``-32603``, or closes that connection
alone. The positive control of each: the same connection (or another client, with a
turn running) goes on and is served.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
import trio_websocket

import trio_agent as ta
from trio_agent._serve import _router
from trio_agent._serve._channel import MessageTooLarge
from trio_agent._serve._connection import Connection, Reply
from trio_agent._serve._jsonrpc import PARSE_ERROR, Malformed, Notification, Request, parse
from trio_agent._serve._turn_methods import MAX_LOCAL_IMAGE_BYTES, _read_image
from trio_agent.testing import AppServerClient, LineChannel, WebSocketChannel

from ._harness import app_server, run_turn, start_thread, text_input
from ._live import STEP, serve_subprocess, websocket_server
from ._schema import validate_server_message

REPO = Path(ta.__file__).resolve().parent.parent
NESTED = "[" * 100_000
DEEP_WITH_ID = '{"id": 7, "method": "thread/loaded/list", "params": ' + "[" * 200 + "]" * 200 + "}"


@pytest.mark.parametrize(("text", "kind", "code", "request_id"), [
    (NESTED, Malformed, PARSE_ERROR, None),
    ('{"a":' * 100_000, Malformed, PARSE_ERROR, None),
    (DEEP_WITH_ID, Malformed, PARSE_ERROR, 7),  # parsed, but deeper than 128: refused with its id
    ('{"id": 1, "method": "m", "params": ' + "[" * 127 + "]" * 127 + "}", Request, None, 1),  # 128 levels: fine
    ('{"id": 1, "method": "m", "params": NaN}', Malformed, PARSE_ERROR, None),
    ('{"id": 1, "method": "m", "params": [Infinity, -Infinity]}', Malformed, PARSE_ERROR, None),
    ('{"id": 1, "method": "m", "params": {"n": 1e999999}}', Malformed, PARSE_ERROR, None),
    ('{"id": ' + "9" * 5000 + ', "method": "m"}', Malformed, PARSE_ERROR, None),
    ('{"id": 1, "method": "m", "params": {"n": 1e300, "m": -0.0, "i": ' + "9" * 4000 + "}}", Request, None, 1),
    ('{"id": "\\ud800", "method": "\\udc00"}', Request, None, "\ud800"),
    ('{"method": "initialized", "method": "x"}', Notification, None, None),  # the last duplicate wins
    ('{"id": 1, "jsonrpc": ["2.0"], "method": "m"}', Malformed, -32600, 1),
    ('{"id": [1], "method": "m"}', Malformed, -32600, None),
    ('"just a string"', Malformed, -32600, None),
    ("\ufffd\ufffd{", Malformed, PARSE_ERROR, None),
])
def test_parse_sorts_any_text_and_never_raises(text: str, kind: type, code: int | None,
                                               request_id: object) -> None:
    message = parse(text)
    assert isinstance(message, kind), message
    assert getattr(message, "id", None) == request_id
    if code is not None:
        assert isinstance(message, Malformed) and message.code == code
        assert len(message.reason) < 400  # the values it names are abbreviated


async def test_a_nested_message_on_stdio_is_a_warning_and_the_server_goes_on(tmp_path: Path) -> None:
    """The issue's reproduction: ``trio-agent serve`` on stdio, one nested line first."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "trio_agent", "serve", "--local", "--home", str(home)]
    async with serve_subprocess(command, cwd=tmp_path, env=env, stderr=subprocess.DEVNULL) as (_, client):
        with trio.fail_after(STEP * 2):
            for line in (NESTED, '{"a":' * 50_000, '{"id": 1, "method": "x", "params": NaN}'):
                await client.send_raw(line)
                warning = await client.read_notification("warning")
                assert "not JSON" in warning["message"], warning
            await client.send_raw(DEEP_WITH_ID)
            assert "more than 128 deep" in (await client.read_error(7)).message
            await client.initialize(name="after-the-garbage")
            thread_id = (await client.request("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
            done = await run_turn(client, thread_id, "still here?")
            assert done["turn"]["status"] == "completed"


async def test_a_nested_message_over_websocket_leaves_other_clients_and_their_turn(tmp_path: Path) -> None:
    """A bystander's turn runs (its command waits for a file) while another client sends
    the nested message; the sender is answered and goes on, the turn completes."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace) as port:
        url = f"ws://127.0.0.1:{port}"
        async with trio_websocket.open_websocket_url(url) as ws_a, trio_websocket.open_websocket_url(url) as ws_b:
            bystander = AppServerClient(WebSocketChannel(ws_a), validate=validate_server_message)
            hostile = AppServerClient(WebSocketChannel(ws_b), validate=validate_server_message)
            with trio.fail_after(STEP * 2):
                await bystander.initialize(name="bystander")
                started = await bystander.request("thread/start", {"cwd": str(workspace)})
                command = "until [ -e go ]; do sleep 0.05; done; echo released"
                turn = await bystander.request("turn/start", {"threadId": started["thread"]["id"],
                                                              "input": text_input(f"run: {command}")})
                await bystander.read_notification("item/started", lambda p, c=command: p["item"].get(
                    "commandActions") == [{"type": "unknown", "command": c}])
                await hostile.initialize(name="hostile")
                await hostile.send_raw(NESTED)
                assert "not JSON" in (await hostile.read_notification("warning"))["message"]
                await hostile.send_raw(DEEP_WITH_ID)
                assert (await hostile.read_error(7)).code == PARSE_ERROR
                assert (await hostile.request("thread/loaded/list"))["data"] == [started["thread"]["id"]]
                (workspace / "go").touch()
                done = await bystander.read_notification("turn/completed",
                                                         lambda p: p["turn"]["id"] == turn["turn"]["id"])
    assert done["turn"]["status"] == "completed"
    assert "released" in json.dumps(done["turn"]["items"])


@pytest.mark.parametrize(("method", "params", "says"), [
    ("thread/start", {"sandbox": ["workspace-write"]}, "`sandbox` must be one of"),
    ("thread/start", {"approvalPolicy": {"never": True}}, "`approvalPolicy` must be one of"),
    ("thread/start", {"config": {"thread_unload_delay_secs": 10 ** 400}}, "thread_unload_delay_secs must be"),
    ("thread/list", {"cwd": [{"not": "a path"}]}, "`cwd` must be a path"),
    ("thread/list", {"cursor": "9" * 4000}, "is not a cursor this server gave out"),
    ("thread/loaded/list", {"cursor": "-5"}, "is not a cursor this server gave out"),
    # issue 22's methods
    ("thread/start", {"approvalsReviewer": ["user"]}, "`approvalsReviewer` must be one of"),
    ("thread/start", {"permissions": {"profile": ":read-only"}}, "`permissions` must be one of"),
    ("account/read", {"refreshToken": "yes"}, "`refreshToken` must be"),
    ("account/login/start", {"type": ["apiKey"]}, "`type` must be"),
    ("account/login/start", {"type": "apiKey", "apiKey": {"key": "k"}}, "`apiKey` must be"),
    ("account/login/cancel", {"loginId": 5}, "`loginId` must be"),
    ("config/read", {"includeLayers": "no"}, "`includeLayers` must be"),
    ("hooks/list", {"cwds": "/a"}, "`cwds` must be"),
    ("skills/list", {"cwds": [None]}, "`cwds` must be"),
    ("plugin/installed", {"cwds": 5}, "`cwds` must be"),
    ("app/list", {"limit": "all"}, "`limit` must be"),
    ("thread/name/set", {"threadId": 5, "name": "x"}, "`threadId` must be"),
    ("thread/archive", {"threadId": ["x"]}, "`threadId` must be"),
    ("thread/turns/list", {"threadId": "x", "limit": -1}, "`limit` must be"),
    ("thread/rollback", {"threadId": "x", "numTurns": 1.5}, "`numTurns` must be"),
    ("thread/revert", {"threadId": "x", "beforeTurnId": 5}, "`beforeTurnId` must be"),
    ("thread/list", {"sourceKinds": "appServer"}, "`sourceKinds` must be"),
    ("thread/list", {"parentThreadId": 5}, "`parentThreadId` must be"),
    ("thread/list", {"sectionId": {"id": 1}}, "`sectionId` must be"),
    ("thread/list", {"originators": [1]}, "`originators` must be"),
])
async def test_params_of_any_type_are_invalid_params_not_internal_errors(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, method: str, params: dict[str, Any], says: str
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        error = await client.read_error(await client.send_request(method, params))
        assert (error.code, method in error.message, says in error.message) == (-32602, True, True), error
        assert await client.request("thread/loaded/list") == {"data": [], "nextCursor": None}


async def test_turn_params_of_any_type_are_invalid_params(tmp_path: Path,
                                                          autojump_clock: trio.testing.MockClock) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        for extra, says in (({"sandboxPolicy": {"type": ["readOnly"]}}, "`sandboxPolicy` must be"),
                            ({"approvalPolicy": ["never"]}, "`approvalPolicy` must be one of")):
            error = await client.read_error(await client.send_request(
                "turn/start", {"threadId": thread_id, "input": text_input("hi"), **extra}))
            assert error.code == -32602 and says in error.message, error
        assert (await run_turn(client, thread_id, "fine"))["turn"]["status"] == "completed"


async def test_a_local_image_that_never_ends_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO as ``localImage`` blocked a thread of the server forever (and /dev/zero was
    read without end): only regular files are read, at most one byte past the limit.
    (Real clock: the file is read in a thread, which MockClock's autojump cannot see.)"""
    fifo = tmp_path / "image.png"
    os.mkfifo(fifo)
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        request = await client.send_request("turn/start", {"threadId": thread_id, "input": [
            {"type": "localImage", "path": str(fifo)}, *text_input("look")]})
        with trio.move_on_after(STEP) as waited:
            error = await client.read_error(request)
        if waited.cancelled_caught:  # unblock the server's thread, then fail
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            raise AssertionError("turn/start with a FIFO as its image was not answered")
        assert error.code == -32602 and "not a regular file" in error.message
        nul = [{"type": "localImage", "path": "a\x00b.png"}, *text_input("look")]  # was -32603 (ValueError)
        error = await client.read_error(await client.send_request("turn/start", {"threadId": thread_id, "input": nul}))
        assert error.code == -32602 and "cannot read the image" in error.message, error
        assert (await run_turn(client, thread_id, "fine"))["turn"]["status"] == "completed"
    with pytest.raises(OSError, match="not a regular file"):
        _read_image("/dev/zero")
    big = tmp_path / "big.png"
    big.write_bytes(b"\0" * (MAX_LOCAL_IMAGE_BYTES + 10))
    assert len(_read_image(str(big))) == MAX_LOCAL_IMAGE_BYTES + 1


async def test_a_bug_answering_one_request_is_its_error_and_the_server_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler whose result cannot be encoded, or whose ``after`` raises: that request
    gets -32603 (or its answer and a warning); the connection and everyone else go on."""

    async def unencodable(server: object, conn: Connection, params: object) -> Reply:
        await trio.lowlevel.checkpoint()
        return Reply({"data": {1, 2}})

    loaded_list = _router.METHODS["thread/loaded/list"]

    def fails() -> None:
        raise ZeroDivisionError("a bug after the answer")

    async def after_fails(server: Any, conn: Connection, params: Any) -> Reply:
        reply = await loaded_list(server, conn, params)
        return Reply(reply.result, after=fails)

    # (Methods of the protocol, so that every answer is still checked against its schema.)
    monkeypatch.setitem(_router.METHODS, "model/list", unencodable)
    monkeypatch.setitem(_router.METHODS, "thread/loaded/list", after_fails)
    async with app_server(tmp_path) as harness:
        bystander = await harness.client()
        thread_id = (await start_thread(bystander))["id"]
        client = await harness.client()
        error = await client.read_error(await client.send_request("model/list"))
        assert error.code == -32603 and "TypeError" in error.message
        assert await client.request("thread/loaded/list") == {"data": [thread_id], "nextCursor": None}
        warning = await client.read_notification("warning")
        assert "after answering 'thread/loaded/list'" in warning["message"]
        assert "ZeroDivisionError" in warning["message"]
        assert (await run_turn(bystander, thread_id, "hello"))["turn"]["status"] == "completed"


async def test_a_bug_in_one_connection_closes_it_alone(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a connection's own reader (here: routing a reply raises) ends that
    connection; the server and its other clients go on."""

    def broken(self: Connection, message: object) -> None:
        raise RuntimeError("a bug routing a reply")

    monkeypatch.setattr(Connection, "_route_reply", broken)
    async with app_server(tmp_path) as harness:
        bystander = await harness.client()
        thread_id = (await start_thread(bystander))["id"]
        victim = await harness.client()
        await victim.send_raw('{"id": 99, "result": {}}')  # a reply to no request: routed, and the bug fires
        with trio.fail_after(STEP):
            await harness.served[victim].wait()  # its connection ended
        assert (await run_turn(bystander, thread_id, "hello"))["turn"]["status"] == "completed"
        newcomer = await harness.client()
        assert await newcomer.request("thread/loaded/list") == {"data": [thread_id], "nextCursor": None}


async def test_line_framing_at_every_split_and_an_overlong_last_line() -> None:
    """The framing after its change to search a long line once (not once per read):
    lines arrive whole however the bytes are split, a last line without its newline is
    a message, one over the limit is ``MessageTooLarge`` and the channel goes on. (A
    regression test of that change; main passes it too.)"""
    data = b'{"a": 1}\r\n\n' + b"x" * 30 + b"\nlast"
    for split in range(1, len(data)):
        send, receive = trio.testing.memory_stream_pair()
        channel = LineChannel(receive, max_message_bytes=40)
        await send.send_all(data[:split])
        await send.send_all(data[split:])
        await send.aclose()
        assert [await channel.receive() for _ in range(3)] == ['{"a": 1}', "x" * 30, "last"], split
        with pytest.raises(trio.EndOfChannel):
            await channel.receive()
    send, receive = trio.testing.memory_stream_pair()
    channel = LineChannel(receive, max_message_bytes=10)
    await send.send_all(b"ok\n" + b"y" * 11)
    await send.aclose()
    assert await channel.receive() == "ok"
    with pytest.raises(MessageTooLarge):
        await channel.receive()
    with pytest.raises(trio.EndOfChannel):
        await channel.receive()
