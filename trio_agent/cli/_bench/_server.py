"""The benchmark's scripted Responses server, and the benchmark process's handle on it.

The server runs in a child process (``python -m trio_agent.cli._bench --serve
SETTINGS``, :func:`serve`) on 127.0.0.1, so that the benchmark process's CPU time is
the client's alone. It speaks WebSocket (the test kit's ``FakeResponsesServer``) and
HTTP/1.1 with server-sent events, and injects the network of :class:`Settings`: the
one-way ``delay`` on every request and reply, a handshake round trip (``2 x delay``)
once per new connection, ``think`` time before an answer's first frame, and an error
for the next ``fail_warmups`` warmups.

An answer is due at a fixed time after its request *reached this host* -- the kernel's
receive timestamp of the request's last bytes (``SO_TIMESTAMPNS``, on Trio's clock) plus
``delay + think + delay``, one timer -- not after the server's process got round to
reading and parsing it. On a shared machine that moment varied with the client: the
client's own work after its send competes with the server for a core, and the server's
parse depends on the client's bytes; measured at 25 ms (issue 30 item 4), the server
read the agent's request ~20-30 us later than the bare client's, on top of ~0.3 ms of
wake-up latency that spread with the machine's load. From the arrival on, the reply
time no longer depends on which client sent the bytes (a stream without timestamps --
a memory stream in the tests, the first packets before the kernel turns them on --
counts from the read, as before). An answer's frames still go out one write each, as a
streaming server's do: written at once, the agent's and the bare client's reply times
matched within ~0.04 ms, but the client's per-arrival work (real for a streamed answer)
dropped out at 0 ms RTT -- a different workload, not a more exact measurement. It
takes JSON control lines on stdin
(``configure``, ``last``) until EOF, its signal to exit.

:func:`open_bench_server` starts it -- this tree's ``trio_agent``, in a session of its
own -- and gives a :class:`BenchServer`: the URLs, ``configure`` and ``last_requests``.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio_websocket

__all__ = ["BenchServer", "Settings", "answer_frames", "open_bench_server", "serve"]

_TREE = str(Path(__file__).resolve().parents[3])  # the child imports this very trio_agent


@attrs.define
class Settings:
    """Seconds: one-way ``delay``, server ``think`` time; ``deltas`` text frames per answer."""

    delay: float = 0.005
    think: float = 0.020
    deltas: int = 20
    fail_warmups: int = 0  # the next N warmups are answered with an error frame


# -- the scripted server (child process) ----------------------------------------------------

# Linux's SO_TIMESTAMPNS (also its control message's type); Python's socket module does
# not name it. Elsewhere no timestamps: arrivals count from the read.
_SO_TIMESTAMPNS = 35 if sys.platform.startswith("linux") else None
_TIMESPEC = struct.Struct("@qq")


class _Arrivals(trio.abc.Stream):
    """A server connection's stream that knows when the latest bytes it read reached
    this host, on Trio's clock (``arrival``): the kernel's receive timestamp of the last
    segment a read returned (see the module docstring), or the read's own time when the
    stream has none."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._socket: Any = None
        if _SO_TIMESTAMPNS is not None and isinstance(stream, trio.SocketStream):
            try:
                stream.socket.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                self._socket = stream.socket
            except OSError:
                pass
        self.arrival = 0.0

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._socket is None:
            data = await self._stream.receive_some(max_bytes)
            self.arrival = trio.current_time()
            return data
        try:
            data, ancillary, _flags, _address = await self._socket.recvmsg(max_bytes or 65536, 64)
        except OSError as exc:
            raise trio.BrokenResourceError(exc) from exc
        now = trio.current_time()
        self.arrival = now
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(value) >= _TIMESPEC.size:
                seconds, nanoseconds = _TIMESPEC.unpack_from(value)
                # realtime -> Trio's clock: how long ago it arrived, from now
                self.arrival = min(now, now - (time.time() - (seconds + nanoseconds / 1e9)))
        data_bytes: bytes = data
        return data_bytes

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()


async def _answer_due(arrival: float, *delays: float) -> None:
    """Sleep until ``arrival`` plus the sum of ``delays`` (one timer: each sleep of Trio
    wakes up to a millisecond late, the epoll timeout being whole milliseconds)."""
    await trio.sleep_until(arrival + sum(delays))


def answer_frames(response_id: str, deltas: int) -> list[dict[str, Any]]:
    """One streamed assistant message: created, item added, ``deltas`` deltas, done, completed."""
    from ...testing import frames

    message = frames.assistant_message("x" * deltas, item_id=f"msg_{response_id}")
    return [
        frames.response_created(response_id),
        frames.output_item_added(0, {**message, "content": []}),
        *[frames.text_delta(0, "x") for _ in range(deltas)],
        frames.output_item_done(0, message),
        frames.completed(response_id, [message]),
    ]


@attrs.define
class _ServerState:
    settings: Settings
    last: dict[str, Any] = attrs.field(factory=dict)  # transport -> last generating request body
    counts: dict[str, int] = attrs.field(factory=lambda: dict.fromkeys(
        ("ws_connections", "ws_requests", "http_connections", "http_requests"), 0))

    def next_id(self) -> str:
        return f"resp-{self.counts['ws_requests'] + self.counts['http_requests']}"


async def _serve_ws_connection(conn: Any, stream: _Arrivals, state: _ServerState) -> None:
    from ...testing import ClientDisconnected

    try:
        while True:
            request = await conn.next_request()
            arrival = stream.arrival
            state.counts["ws_requests"] += 1
            s = state.settings
            if request.get("generate") is False:
                await _answer_due(arrival, s.delay, s.delay)  # the request travels, the reply travels
                if s.fail_warmups > 0:
                    s.fail_warmups -= 1
                    await conn.send_error("warmup unavailable")
                    continue
                await conn.send_warmup(state.next_id())
                continue
            state.last["ws"] = request
            await _answer_due(arrival, s.delay, s.think, s.delay)  # travels, think, the first frame travels
            await conn.send_all(answer_frames(state.next_id(), s.deltas))
    except (ClientDisconnected, trio_websocket.ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
        return  # the client went away


async def _serve_websocket(server: Any, state: _ServerState) -> None:
    async with trio.open_nursery() as nursery:
        while True:
            raw = await server.accept_raw()
            state.counts["ws_connections"] += 1
            nursery.start_soon(_accept_ws, raw, state, nursery)


async def _accept_ws(raw: Any, state: _ServerState, nursery: trio.Nursery) -> None:
    await trio.sleep(state.settings.delay * 2)  # TCP + upgrade round trip
    stream = raw.stream = _Arrivals(raw.stream)
    try:
        conn = await raw.accept()
    except (trio.BrokenResourceError, trio_websocket.ConnectionClosed):
        return
    nursery.start_soon(_serve_ws_connection, conn, stream, state)


async def _serve_http(state: _ServerState, *, task_status: Any) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def handler(stream: trio.SocketStream) -> None:
        await _http_connection(stream, state)

    await trio.serve_listeners(handler, listeners)


async def _http_connection(stream: trio.abc.Stream, state: _ServerState) -> None:
    """HTTP/1.1 with keep-alive: the handshake round trip is charged once per connection."""
    import h11

    state.counts["http_connections"] += 1
    await trio.sleep(state.settings.delay * 2)  # TCP (+ TLS) handshake
    conn = h11.Connection(h11.SERVER)
    stream = _Arrivals(stream)
    try:
        while True:
            body = await _read_http_request(stream, conn)
            if body is None:
                return
            arrival = stream.arrival
            state.counts["http_requests"] += 1
            state.last["http"] = json.loads(body) if body else {}
            s = state.settings
            await _answer_due(arrival, s.delay, s.think, s.delay)
            sse = "".join(f"data: {json.dumps(f, separators=(',', ':'))}\n\n"
                          for f in answer_frames(state.next_id(), s.deltas)) + "data: [DONE]\n\n"
            payload = sse.encode()
            head = [("content-type", "text/event-stream"), ("content-length", str(len(payload)))]
            await stream.send_all(conn.send(h11.Response(status_code=200, headers=head)) or b"")
            await stream.send_all((conn.send(h11.Data(data=payload)) or b"") + (conn.send(h11.EndOfMessage()) or b""))
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
        return
    finally:
        await trio.aclose_forcefully(stream)


async def _read_http_request(stream: trio.abc.Stream, conn: Any) -> bytes | None:
    import h11

    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(bytes(await stream.receive_some(65536)))
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def serve(settings: Settings) -> None:
    """The child process: print the URLs, then answer control lines on stdin until EOF."""
    from ...testing import FakeResponsesServer

    state = _ServerState(settings)
    ws = FakeResponsesServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(ws.serve)
        http_port = await nursery.start(_serve_http, state)
        nursery.start_soon(_serve_websocket, ws, state)
        _reply({"ws_url": ws.url, "http_base_url": f"http://127.0.0.1:{http_port}/v1"})
        control = _Lines(trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())))
        while (line := await control.next()) is not None:
            command = json.loads(line)
            if command["op"] == "configure":
                state.settings = Settings(**command["settings"])
                _reply({"ok": True})
            elif command["op"] == "last":
                _reply({"last": state.last, "counts": state.counts})
        nursery.cancel_scope.cancel()


def _reply(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


class _Lines:
    """Lines of a byte stream (a plain class: no async generator left to finalise)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def next(self) -> str | None:
        """The next line without its newline, or ``None`` at EOF."""
        while b"\n" not in self._buffer:
            data = await self._stream.receive_some(65536)
            if not data:
                return None
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()


# -- the server, seen from the benchmark process --------------------------------------------


class BenchServer:
    """A handle on the child-process server: ``ws_url``, ``http_base_url``, ``configure``,
    ``last_requests`` (the last generating body per transport, and the counters)."""

    def __init__(self, process: trio.Process, lines: _Lines, hello: dict[str, Any]) -> None:
        self._process = process
        self._lines = lines
        self._lock = trio.Lock()
        self.ws_url: str = hello["ws_url"]
        self.http_base_url: str = hello["http_base_url"]

    @property
    def pid(self) -> int:
        """The child's process id (``turn_overhead --wakes --pin`` sets its CPU affinity)."""
        return self._process.pid

    async def _call(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None
        async with self._lock:
            await self._process.stdin.send_all((json.dumps(command) + "\n").encode())
            line = await self._lines.next()
            if line is None:
                raise RuntimeError("the benchmark server exited")
            reply: dict[str, Any] = json.loads(line)
            return reply

    async def configure(self, settings: Settings) -> None:
        await self._call({"op": "configure", "settings": attrs.asdict(settings)})

    async def last_requests(self) -> dict[str, Any]:
        return await self._call({"op": "last"})


@asynccontextmanager
async def open_bench_server(settings: Settings) -> AsyncIterator[BenchServer]:
    """Start the scripted server in a child process (this tree's ``trio_agent``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_TREE, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "trio_agent.cli._bench", "--serve", json.dumps(attrs.asdict(settings))]
    # A session of its own: a terminal's Ctrl-C reaches the benchmark, which closes the
    # child's stdin (the child's signal to exit), never the child itself (no traceback).
    process = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                               start_new_session=True)
    try:
        assert process.stdout is not None
        lines = _Lines(process.stdout)
        hello = await lines.next()
        if hello is None:
            raise RuntimeError("the benchmark server exited before it listened")
        yield BenchServer(process, lines, json.loads(hello))
    finally:
        with trio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()

