"""First-token latency per warmup path, side by side with the bare-socket floor.

The scripted Responses server runs in a **child process** (``python -m
trio_agent.cli._bench --serve``) on 127.0.0.1, so this process's CPU time is the client's
alone. It injects a one-way network delay (``--delay-ms``) on every request and
reply, a TCP+handshake round trip (``2 x delay``) once per *new* connection -- a
kept-alive HTTPS connection is not charged again -- and a "think time" before the
first frame of an answer. Each path runs ``--runs`` times after one discarded run
(lazy imports, first-use caches); every run opens a fresh agent (except the floor).

Columns (every number in ms with two decimals, ratios with two decimals):

- ``first emit``: p50 from ``agent.prompt()`` to the emission of the first
  ``assistant.delta`` (its ``event.time``); ``first recv`` p50/p99: to the moment the
  application's ``async for event in agent.events`` received it (what a user sees).
- ``x floor``: ``first recv`` p50 over the floor's p50. The floor
  (``bare_socket_floor``) is a raw trio-websocket client, already connected, sending
  the agent's own first request body (captured from the server) and stopping at the
  first delta.
- ``cpu/turn``: this process's CPU time from ``prompt()`` to ``turn.result()``,
  p50 (the runtime's CPU for one turn: no server, no agent open, no warmup).
- ``n``: samples behind each percentile (p99 of 30 samples is their maximum).

Paths: ``startup_prewarm`` (WebSocket, the prompt after ``model.warmup.completed``),
``shared_prefix_prewarm`` (SPEC sec. 9/3: ``shared_prompt_cache=True``, another agent
of the run already warmed the prefix), ``cold_connect`` (prompt at once, warmup still
in flight), ``warmup_fallback`` (the warmup fails, a second socket replays in full),
``https_store`` / ``https_ephemeral`` (one httpx client per agent: ~25 ms of CA
loading, a new connection), ``https_shared_client`` (one long-lived httpx client: a
kept-alive connection), and ``openai_sdk_https`` (the ``openai`` SDK's streaming call,
the reference client; only with ``pip install 'trio-agent[bench]'``).

    trio-agent bench --runs 50 --delay-ms 5 --think-ms 20
    python -m benchmarks.first_token ...        (the same, from a checkout)
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio_websocket

import trio_agent as ta

_TREE = str(Path(__file__).resolve().parents[2])  # the child imports this very trio_agent

__all__ = [
    "BenchServer", "Sample", "Settings", "agent_first_token", "bench_config", "main", "open_bench_server", "pct", "run",
]


@attrs.define
class Settings:
    """Seconds: one-way ``delay``, server ``think`` time; ``deltas`` text frames per answer."""

    delay: float = 0.005
    think: float = 0.020
    deltas: int = 20
    fail_warmups: int = 0  # the next N warmups are answered with an error frame


# -- the scripted server (child process) ----------------------------------------------------


def answer_frames(response_id: str, deltas: int) -> list[dict[str, Any]]:
    """One streamed assistant message: created, item added, ``deltas`` deltas, done, completed."""
    from ..testing import frames

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


async def _serve_ws_connection(conn: Any, state: _ServerState) -> None:
    from ..testing import ClientDisconnected

    try:
        while True:
            request = await conn.next_request()
            state.counts["ws_requests"] += 1
            s = state.settings
            await trio.sleep(s.delay)  # the request travels
            if request.get("generate") is False:
                if s.fail_warmups > 0:
                    s.fail_warmups -= 1
                    await trio.sleep(s.delay)
                    await conn.send_error("warmup unavailable")
                    continue
                await trio.sleep(s.delay)
                await conn.send_warmup(state.next_id())
                continue
            state.last["ws"] = request
            await trio.sleep(s.think + s.delay)  # think, then the first frame travels
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
    try:
        conn = await raw.accept()
    except (trio.BrokenResourceError, trio_websocket.ConnectionClosed):
        return
    nursery.start_soon(_serve_ws_connection, conn, state)


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
    try:
        while True:
            body = await _read_http_request(stream, conn)
            if body is None:
                return
            state.counts["http_requests"] += 1
            state.last["http"] = json.loads(body) if body else {}
            s = state.settings
            await trio.sleep(s.delay + s.think + s.delay)
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


async def _serve(settings: Settings) -> None:
    """The child process: print the URLs, then answer control lines on stdin until EOF."""
    from ..testing import FakeResponsesServer

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


# -- the clients ----------------------------------------------------------------------------


@attrs.frozen
class Sample:
    """Seconds: first delta emitted, first delta received by the application, turn CPU."""

    first_emit: float
    first_recv: float
    cpu: float


async def bare_websocket(server: BenchServer, body: dict[str, Any]) -> Sample:
    """The floor: a raw trio-websocket client, already connected, sending ``body``."""
    async with trio_websocket.open_websocket_url(server.ws_url, max_message_size=64 << 20) as ws:
        cpu, start = time.process_time(), trio.current_time()
        await ws.send_message(json.dumps(body))
        first = None
        while True:
            frame = json.loads(await ws.get_message())
            if first is None and frame["type"] == "response.output_text.delta":
                first = trio.current_time() - start
            if frame["type"] == "response.completed":
                assert first is not None
                return Sample(first, first, time.process_time() - cpu)


async def agent_first_token(config: ta.AgentConfig, *, wait_for_warmup: bool) -> Sample:
    """Open an agent, (optionally) wait for its warmup, prompt it; time the first delta."""
    async with trio.open_nursery() as nursery, ta.open_agent(config) as agent:
        first_token, warm = trio.Event(), trio.Event()
        times: dict[str, float] = {}

        async def watch() -> None:
            async for event in agent.events:
                if event.kind in (ta.EventKind.MODEL_WARMUP_COMPLETED, ta.EventKind.MODEL_WARMUP_FAILED):
                    warm.set()
                if event.kind is ta.EventKind.ASSISTANT_DELTA and not first_token.is_set():
                    times["emit"], times["recv"] = event.time, trio.current_time()
                    first_token.set()

        nursery.start_soon(watch)
        if wait_for_warmup:
            await warm.wait()
        cpu, start = time.process_time(), trio.current_time()
        turn = await agent.prompt("hello")
        await turn.result()
        cpu = time.process_time() - cpu
        await first_token.wait()
        return Sample(times["emit"] - start, times["recv"] - start, cpu)


async def openai_sdk(server: BenchServer) -> Sample:
    """The reference client: the ``openai`` SDK's streaming Responses call (one client
    per run, like an application creating its client for a session)."""
    import openai

    client = openai.AsyncOpenAI(api_key="bench", base_url=server.http_base_url, max_retries=0)
    try:
        cpu, start = time.process_time(), trio.current_time()
        first: float | None = None
        stream = await client.responses.create(model="gpt-5.5", input="hello", stream=True)
        async for event in stream:  # read to the end: the SDK's generators dislike early exits
            if event.type == "response.output_text.delta" and first is None:
                first = trio.current_time() - start
        if first is None:
            raise RuntimeError("the openai SDK stream ended without a text delta")
        return Sample(first, first, time.process_time() - cpu)
    finally:
        await client.close()


def bench_config(server: BenchServer, workspace: str, **responses: Any) -> ta.AgentConfig:
    """An agent with no tools on ``server`` (``transport=ta.Transport.HTTPS`` for HTTP/SSE)."""
    shared = responses.pop("shared_prompt_cache", False)
    responses.setdefault("profile", ta.Profile.OPENAI)  # the bench server speaks OpenAI's dialect
    if responses.get("transport") is ta.Transport.HTTPS:
        resp = ta.Responses(api_base_url=server.http_base_url, **responses)
    else:
        resp = ta.Responses(websocket_url=server.ws_url, **responses)
    extra: dict[str, Any] = {"shared_prompt_cache": True, "prompt_cache_key": "bench-shared"} if shared else {}
    return ta.AgentConfig(auth="bench", workspace=workspace, responses=resp, tools=ta.Tools.empty(), **extra)


_HTTPS = ta.Transport.HTTPS
_Client = Callable[["_Run"], Awaitable[Sample]]


@attrs.define
class _Run:
    server: BenchServer
    workspace: str
    floor_body: dict[str, Any]
    shared_client: Any = None

    def agent(self, wait: bool, **responses: Any) -> Awaitable[Sample]:
        return agent_first_token(bench_config(self.server, self.workspace, **responses), wait_for_warmup=wait)


PATHS: dict[str, _Client] = {
    "bare_socket_floor": lambda r: bare_websocket(r.server, r.floor_body),
    "startup_prewarm": lambda r: r.agent(True),
    "shared_prefix_prewarm": lambda r: r.agent(True, shared_prompt_cache=True),
    "cold_connect": lambda r: r.agent(False),
    "warmup_fallback": lambda r: r.agent(True),  # the server fails this run's warmup
    "https_store": lambda r: r.agent(False, transport=_HTTPS),
    "https_ephemeral": lambda r: r.agent(False, transport=_HTTPS, store=False, history=ta.History.FULL_REPLAY),
    "https_shared_client": lambda r: r.agent(False, transport=_HTTPS, http_client=r.shared_client),
    "openai_sdk_https": lambda r: openai_sdk(r.server),
}


def missing_reference() -> str | None:
    """Why the ``openai_sdk_https`` row cannot run here, or ``None`` when it can."""
    try:
        import openai  # noqa: F401
    except ImportError:
        return "the openai package is not installed (pip install 'trio-agent[bench]')"
    return None


def available_paths() -> list[str]:
    """Every path whose client is installed (the ``openai`` SDK is an optional extra)."""
    return [name for name in PATHS if name != "openai_sdk_https" or missing_reference() is None]


async def _measure(name: str, run_: _Run, settings: Settings, runs: int) -> list[Sample]:
    """One discarded run, then ``runs`` timed runs."""
    samples = []
    for _ in range(runs + 1):
        if name == "warmup_fallback":
            await run_.server.configure(attrs.evolve(settings, fail_warmups=1))
        samples.append(await PATHS[name](run_))
    return samples[1:]


def pct(samples: list[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..1) of at least one sample."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _row(name: str, samples: list[Sample], floor: float) -> dict[str, Any]:
    recv = [s.first_recv for s in samples]
    return {
        "path": name, "first_emit_p50_ms": statistics.median(s.first_emit for s in samples) * 1000,
        "first_recv_p50_ms": statistics.median(recv) * 1000, "first_recv_p99_ms": pct(recv, 0.99) * 1000,
        "ratio_to_floor": statistics.median(recv) / floor,
        "cpu_ms_per_turn": statistics.median(s.cpu for s in samples) * 1000, "runs": len(samples),
    }


async def run(runs: int, settings: Settings, paths: list[str] | None = None) -> list[dict[str, Any]]:
    """Measure ``paths`` (default: every available one); one row per path, the floor first."""
    import httpx

    paths = available_paths() if paths is None else paths
    if "openai_sdk_https" in paths:
        import openai  # noqa: F401  # import once, outside the timed runs
    paths = ["bare_socket_floor", *(p for p in paths if p != "bare_socket_floor")]
    with tempfile.TemporaryDirectory() as workspace:
        async with open_bench_server(settings) as server, httpx.AsyncClient() as shared:
            run_ = _Run(server, workspace, {}, shared)
            await run_.agent(True)  # imports, first-use caches; its request is the floor's body
            run_.floor_body = (await server.last_requests())["last"]["ws"]
            results = {}
            for name in paths:
                await server.configure(settings)
                results[name] = await _measure(name, run_, settings, runs)
    floor = statistics.median(s.first_recv for s in results["bare_socket_floor"])
    return [_row(name, samples, floor) for name, samples in results.items()]


def format_table(rows: list[dict[str, Any]]) -> str:
    head = f"{'path':<23}{'first emit':>11}{'first recv':>11}{'p99 recv':>10}{'x floor':>9}{'cpu/turn':>10}{'n':>5}"
    lines = [head, f"{'':<23}{'p50 ms':>11}{'p50 ms':>11}{'ms':>10}{'':>9}{'ms':>10}"]
    for r in rows:
        lines.append(f"{r['path']:<23}{r['first_emit_p50_ms']:>11.2f}{r['first_recv_p50_ms']:>11.2f}"
                     f"{r['first_recv_p99_ms']:>10.2f}{r['ratio_to_floor']:>9.2f}{r['cpu_ms_per_turn']:>10.2f}"
                     f"{r['runs']:>5}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``trio-agent bench`` (and the child's ``--serve``): ``_bench_command``."""
    from ._bench_command import main as command

    return command(argv)


if __name__ == "__main__":
    raise SystemExit(main())
