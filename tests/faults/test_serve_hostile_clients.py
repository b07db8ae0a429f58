"""Fault matrix, generated: hostile clients of ``trio-agent serve`` on both transports
(issue 21, hole 7, and the issue's property-based test).

Each example throws generated framing and JSON at a live server (the app server in
process with the built-in local model, on real descriptors) while a bystander runs a
turn whose command waits until the garbage is out:

- stdio (``serve_stdio`` over two pipes, the one client): the client initializes,
  starts a thread and its turn, and a second thread for the garbage to name (its
  requests then reach a live thread's handlers), then writes the garbage -- JSON-RPC-shaped objects with
  wrong types and huge or non-JSON values, nested structures, invalid UTF-8, partial
  lines, blank and ``\\r\\n`` lines -- then a newline. The server must answer a
  well-formed request after it, and the turn must complete.
- WebSocket (``serve_websocket`` on 127.0.0.1:0): a hostile client starts a thread of
  its own, sends the garbage as text and binary frames and must still be answered
  afterwards; a second hostile
  connection writes raw bytes (not HTTP, or a handshake with random headers followed by
  raw frames: reserved opcodes, unmasked, invalid UTF-8 in text) and may be closed;
  the bystander is another client, whose turn must complete.

The nested message of the issue (``'[' * 100000``) is an explicit example. Examples are
few and derandomized, so the test takes seconds and is the same on every run.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio_websocket
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trio_agent._serve._router import METHODS
from trio_agent.testing import AppServerClient, LineChannel, WebSocketChannel

from ..serve._harness import text_input
from ..serve._live import STEP, handshake, live_app, stdio_client, websocket_server
from ..serve._schema import validate_server_message

Json = dict[str, Any]
NESTED = "[" * 100_000
HUGE = "__HUGE__"
THREAD = "__THREAD__"  # replaced, when sent, by the id of a live thread of the hostile client's own
GATE = "until [ -e go ]; do sleep 0.02; done; echo released"
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# -- generated messages -------------------------------------------------------------------

PARAM_KEYS = ["threadId", "turnId", "expectedTurnId", "input", "cwd", "sandbox", "sandboxPolicy", "approvalPolicy",
              "dynamicTools", "config", "cursor", "limit", "clientInfo", "capabilities", "items", "ephemeral", "model",
              "effort", "type", "text", "path", "url", "networkAccess", "writableRoots", "includeTurns"]
HUGE_LITERALS = ["1e999999", "-1e999", "NaN", "Infinity", "-Infinity", "9" * 5000, "1" * 4200, '"\\ud800"',
                 '"\\udfff\\ud800x"', "-0", "1E400", "[" * 300 + "]" * 300]
scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=12) | st.just(HUGE) | st.just(THREAD)
           | st.sampled_from(["", "/", "untrusted", "danger-full-access", "readOnly", "localImage", "text"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(PARAM_KEYS) | st.text(max_size=6), inner, max_size=4), max_leaves=12)
ids = st.integers(max_value=-1) | st.integers(min_value=10**6) | st.text(max_size=5) | values
methods = st.sampled_from([*sorted(METHODS), "initialized", "nope/nope", ""]) | values
rpc_objects = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.just("2.0") | values, "id": ids, "method": methods, "result": values, "error": values,
    "params": st.dictionaries(st.sampled_from(PARAM_KEYS), values, max_size=5) | values,
})


@st.composite
def rendered(draw: st.DrawFn) -> str:
    """A JSON-RPC-shaped object as text, each ``HUGE`` placeholder a hostile literal."""
    text = json.dumps(draw(rpc_objects))
    while f'"{HUGE}"' in text:
        text = text.replace(f'"{HUGE}"', draw(st.sampled_from(HUGE_LITERALS)), 1)
    return text


nested = st.one_of(
    st.integers(129, 200_000).map(lambda n: "[" * n),
    st.integers(100, 3000).map(lambda n: '{"id": -7, "method": "thread/loaded/list", "params": '
                                         + "[" * n + "]" * n + "}"),
    st.integers(100, 100_000).map(lambda n: '{"a":' * n),
)
texts = st.one_of(rendered(), nested, st.text(max_size=30),
                  st.sampled_from(["", " ", "{", "}", "[]", "null", "1e999999", '"x"', '{"id":1', '{"id": -1}',
                                   '{"method": "initialized", "params": NaN}']))

# stdio: bytes, each a message with a line end (none: the next one continues the line), or raw bytes.
LINE_ENDS = [b"\n", b"\r\n", b"\n\n", b"", b"\n \r\n"]
chunks = st.one_of(st.tuples(texts, st.sampled_from(LINE_ENDS)).map(lambda t: t[0].encode() + t[1]),
                   st.binary(max_size=40))
# WebSocket: text frames, and binary frames (which the server decodes as UTF-8, with replacement).
frames = st.one_of(texts.map(lambda t: ("text", t)), texts.map(lambda t: ("binary", t.encode())),
                   st.binary(max_size=40).map(lambda b: ("binary", b)))


@st.composite
def raw_frame(draw: st.DrawFn) -> bytes:
    """One WebSocket frame as bytes, possibly invalid: any opcode, masked or not, FIN or not."""
    opcode = draw(st.sampled_from([0x0, 0x1, 0x2, 0x3, 0x8, 0x9, 0xA, 0xB, 0xF]))
    payload = draw(st.binary(max_size=40) | texts.map(lambda t: t.encode()[:2000]))
    head = bytes([(0x80 if draw(st.booleans()) else 0) | opcode])
    masked = draw(st.booleans())
    size = len(payload)
    length = bytes([size | (0x80 if masked else 0)]) if size < 126 else bytes([126 | (0x80 if masked else 0)]) + \
        size.to_bytes(2, "big")
    if not masked:
        return head + length + payload
    key = draw(st.binary(min_size=4, max_size=4))
    return head + length + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


HEADERS = ["Authorization: Bearer x", "Sec-WebSocket-Version: 8", "Upgrade: h2c", "Connection: close",
           "Sec-WebSocket-Key: x", "Host: a", "Origin: null", "X: " + "y" * 20000, "Transfer-Encoding: chunked"]
raw_attacks = st.one_of(
    st.binary(max_size=200),
    st.tuples(st.lists(st.sampled_from(HEADERS), max_size=3), st.lists(raw_frame(), max_size=4)).map(
        lambda t: handshake("/", *t[0]) + b"".join(t[1])),
)

# -- the bystander --------------------------------------------------------------------------


def validate_ours(message: Json, answered_method: str | None) -> None:
    """The schema check, except for answers to requests the client did not make (the garbage's)."""
    if answered_method is not None or "method" in message:
        validate_server_message(message, answered_method)


async def own_thread(client: AppServerClient, workspace: Path) -> str:
    """A thread for the garbage to name (so that its requests reach a live thread)."""
    return (await client.request("thread/start", {"cwd": str(workspace)}))["thread"]["id"]  # type: ignore[no-any-return]


async def start_gated_turn(client: AppServerClient, workspace: Path) -> str:
    """A thread whose turn runs a command that waits for ``workspace/go``; the turn id."""
    await client.initialize(name="bystander")
    thread = (await client.request("thread/start", {"cwd": str(workspace)}))["thread"]
    turn = await client.request("turn/start", {"threadId": thread["id"], "input": text_input(f"run: {GATE}")})
    await client.read_notification("item/started", lambda p: p["item"].get("commandActions") == [
        {"type": "unknown", "command": GATE}])
    return turn["turn"]["id"]  # type: ignore[no-any-return]


async def finish_turn(client: AppServerClient, workspace: Path, turn_id: str) -> None:
    (workspace / "go").touch()
    done = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)
    assert done["turn"]["status"] == "completed", done
    assert "released" in json.dumps(done["turn"]["items"])


async def answered(channel: WebSocketChannel, request_id: str, method: str = "thread/loaded/list") -> None:
    """A well-formed request on ``channel`` gets its answer (a result or an error)."""
    await channel.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}}))
    while True:
        message = json.loads(await channel.receive())
        if message.get("id") == request_id and "method" not in message:
            return


@asynccontextmanager
async def directories() -> AsyncIterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        yield workspace, Path(tmp) / "home"


def run(test: Callable[[Path, Path], Any]) -> None:
    async def main() -> None:
        async with directories() as (workspace, home):
            with trio.fail_after(STEP * 3):
                await test(workspace, home)

    trio.run(main)


# -- the properties -------------------------------------------------------------------------


@SETTINGS
@given(garbage=st.lists(chunks, min_size=1, max_size=8))
@example(garbage=[NESTED.encode() + b"\n"])
@example(garbage=[b'{"a":' * 100_000, b"\xff\xfe\n", "\ud800".encode("utf-8", "surrogatepass") + b"\r\n"])
def test_stdio_survives_any_input_and_its_turn_completes(garbage: list[bytes]) -> None:
    async def test(workspace: Path, home: Path) -> None:
        async with live_app(home, workspace) as app, stdio_client(app) as stream:
            client = AppServerClient(LineChannel(stream), validate=validate_ours)
            turn_id = await start_gated_turn(client, workspace)
            target = (await own_thread(client, workspace)).encode()
            for chunk in garbage:  # the bytes as generated
                await stream.send_all(chunk.replace(THREAD.encode(), target))
            await stream.send_all(b"\n")
            assert await client.request("thread/loaded/list")  # answered after the garbage
            await finish_turn(client, workspace, turn_id)

    run(test)


@SETTINGS
@given(garbage=st.lists(frames, min_size=1, max_size=8), raw=raw_attacks)
@example(garbage=[("text", NESTED)], raw=b"")
@example(garbage=[("binary", b"\xff" + NESTED.encode())], raw=handshake("/") + b"\x81\x85" + b"\0" * 4 + b"\xff" * 5)
def test_websocket_survives_any_client_and_a_bystanders_turn_completes(garbage: list[tuple[str, Any]],
                                                                      raw: bytes) -> None:
    async def test(workspace: Path, home: Path) -> None:
        async with websocket_server(home, workspace) as port:
            url = f"ws://127.0.0.1:{port}"
            async with trio_websocket.open_websocket_url(url) as by_ws, trio_websocket.open_websocket_url(url) as ws:
                bystander = AppServerClient(WebSocketChannel(by_ws), validate=validate_server_message)
                turn_id = await start_gated_turn(bystander, workspace)
                hostile = WebSocketChannel(ws)
                hostile_client = AppServerClient(hostile)
                await hostile_client.initialize(name="hostile")
                target = await own_thread(hostile_client, workspace)
                for _kind, payload in garbage:  # str: a text frame, bytes: a binary one
                    await ws.send_message(payload.replace(THREAD, target) if isinstance(payload, str)
                                          else payload.replace(THREAD.encode(), target.encode()))
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                async with stream:
                    try:
                        await stream.send_all(raw)
                    except trio.BrokenResourceError:
                        pass  # closed by the server, as it may
                await answered(hostile, "after-the-garbage")  # the hostile client itself goes on
                await finish_turn(bystander, workspace, turn_id)

    run(test)
