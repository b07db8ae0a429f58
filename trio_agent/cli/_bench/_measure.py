"""The benchmark's clients and its measurement: one client per path (the bare-socket
floor, an agent per warmup path and transport, the ``openai`` SDK), one discarded run
then ``runs`` timed ones per path, and the rows and the table of their percentiles.
What each path and column means: the package's docstring.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
import trio_websocket

import trio_agent as ta

from ._server import BenchServer, Settings, open_bench_server

__all__ = [
    "PATHS", "Sample", "agent_first_token", "available_paths", "bench_config", "format_table", "missing_reference",
    "pct", "run",
]


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


async def bare_https(client: Any, url: str, body: dict[str, Any]) -> Sample:
    """The HTTPS floor: a raw ``httpx.AsyncClient`` (kept alive: the run's discarded first
    sample opens its connection, as the WebSocket floor is already connected) POSTing
    ``body`` and parsing the server-sent events line by line."""
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    cpu, start = time.process_time(), trio.current_time()
    first = None
    async with client.stream("POST", url, content=content, headers=headers) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            frame = json.loads(line[6:])
            if first is None and frame["type"] == "response.output_text.delta":
                first = trio.current_time() - start
    if first is None:
        raise RuntimeError("the bare HTTPS stream ended without a text delta")
    return Sample(first, first, time.process_time() - cpu)


async def agent_first_token(config: ta.AgentConfig, *, wait_for_warmup: bool) -> Sample:
    """Open an agent, (optionally) wait for its warmup, prompt it; time the first delta.
    Not waiting means the prompt is in hand at the opening: the agent sends no warmup
    (``open_agent(warmup=False)``, as ``trio-agent run`` does), and the prompt leaves
    once the socket is open."""
    async with trio.open_nursery() as nursery, ta.open_agent(config, warmup=wait_for_warmup) as agent:
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
    https_floor_body: dict[str, Any] = attrs.field(factory=dict)
    floor_client: Any = None  # the bare HTTPS floor's own kept-alive httpx client

    def agent(self, wait: bool, **responses: Any) -> Awaitable[Sample]:
        return agent_first_token(bench_config(self.server, self.workspace, **responses), wait_for_warmup=wait)


PATHS: dict[str, _Client] = {
    "bare_socket_floor": lambda r: bare_websocket(r.server, r.floor_body),
    "bare_https_floor": lambda r: bare_https(r.floor_client, r.server.http_base_url + "/responses", r.https_floor_body),
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


async def _measure(paths: list[str], run_: _Run, settings: Settings, runs: int) -> dict[str, list[Sample]]:
    """One discarded round, then ``runs`` timed rounds of one run per path, the order
    rotated every round: every path and its floor are sampled across the same stretch
    of the machine's life, not one path minutes after another."""
    samples: dict[str, list[Sample]] = {name: [] for name in paths}
    for i in range(runs + 1):
        for k in range(len(paths)):
            name = paths[(k + i) % len(paths)]
            fail = 1 if name == "warmup_fallback" else 0  # the server fails this run's warmup
            await run_.server.configure(attrs.evolve(settings, fail_warmups=fail))
            sample = await PATHS[name](run_)
            if i:
                samples[name].append(sample)
    return samples


def pct(samples: list[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..1) of at least one sample."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


FLOORS = ("bare_socket_floor", "bare_https_floor")
HTTPS_PATHS = frozenset({"bare_https_floor", "https_store", "https_ephemeral", "https_shared_client",
                         "openai_sdk_https"})


def floor_of(name: str) -> str:
    """The floor a path is divided by: the bare HTTPS client for HTTP/SSE paths, the bare
    WebSocket client for the others (each transport against its own wire's floor)."""
    return "bare_https_floor" if name in HTTPS_PATHS else "bare_socket_floor"


def _row(name: str, samples: list[Sample], floor: float) -> dict[str, Any]:
    recv = [s.first_recv for s in samples]
    return {
        "path": name, "floor": floor_of(name),
        "first_emit_p50_ms": statistics.median(s.first_emit for s in samples) * 1000,
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
    paths = [*FLOORS, *(p for p in paths if p not in FLOORS)]
    with tempfile.TemporaryDirectory() as workspace:
        async with open_bench_server(settings) as server, httpx.AsyncClient() as shared, \
                httpx.AsyncClient() as floor_client:
            run_ = _Run(server, workspace, {}, shared, floor_client=floor_client)
            await run_.agent(True)  # imports, first-use caches; its request is the floor's body
            run_.floor_body = (await server.last_requests())["last"]["ws"]
            await run_.agent(False, transport=_HTTPS)  # the same for HTTPS: the HTTPS floor's body
            run_.https_floor_body = (await server.last_requests())["last"]["http"]
            results = await _measure(paths, run_, settings, runs)
    floors = {f: statistics.median(s.first_recv for s in results[f]) for f in FLOORS}
    return [_row(name, samples, floors[floor_of(name)]) for name, samples in results.items()]


def format_table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'path':<23}{'first emit':>11}{'first recv':>11}{'p99 recv':>10}{'x floor':>9}{'cpu/turn':>10}"
            f"{'n':>5}  floor")
    lines = [head, f"{'':<23}{'p50 ms':>11}{'p50 ms':>11}{'ms':>10}{'':>9}{'ms':>10}"]
    for r in rows:
        lines.append(f"{r['path']:<23}{r['first_emit_p50_ms']:>11.2f}{r['first_recv_p50_ms']:>11.2f}"
                     f"{r['first_recv_p99_ms']:>10.2f}{r['ratio_to_floor']:>9.2f}{r['cpu_ms_per_turn']:>10.2f}"
                     f"{r['runs']:>5}  {r['floor'].removeprefix('bare_').removesuffix('_floor')}")
    return "\n".join(lines)

