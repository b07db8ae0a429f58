"""First-token latency per warmup path, side by side with the bare-socket floor.

Every client talks to the same scripted Responses server on 127.0.0.1, with an
injected one-way network delay and a server "think time" before the first delta.
First-token latency is measured from the moment the client submits the prompt to
the moment the first ``response.output_text.delta`` reaches the client code. All
paths run in one process, one after another, repeated ``--runs`` times, and are
reported as p50/p99 and as a ratio to the bare trio-websocket floor (a raw client
sending the same frames); the ``openai`` SDK's streaming call over HTTPS is the
reference client when it is installed (``pip install openai``). Each path gets one
discarded run first. CPU per turn is process CPU time divided by turns.

    trio-agent bench --runs 50 --delay-ms 5 --think-ms 20
    python -m benchmarks.first_token ...        (the same, from a checkout)

The server runs in the same process, so "cpu ms/turn" includes its share; compare
rows with each other, not with absolute numbers. ``https_*`` rows create one httpx
client per agent (as an application opening a fresh agent would: ~25 ms of CA
loading); ``https_shared_client`` passes one long-lived client, the steady state.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio_websocket

import trio_agent as ta

from .testing import ClientDisconnected, FakeConnection, FakeResponsesServer, frames

Path_ = Callable[["Settings", FakeResponsesServer], Awaitable[float]]


class Settings:
    def __init__(self, delay: float, think: float, deltas: int) -> None:
        self.delay = delay
        self.think = think
        self.deltas = deltas


# -- the scripted server ------------------------------------------------------------------


def _answer(response_id: str, deltas: int) -> list[dict[str, Any]]:
    message = frames.assistant_message("x" * deltas, item_id=f"msg_{response_id}")
    return [
        frames.response_created(response_id),
        frames.output_item_added(0, {**message, "content": []}),
        *[frames.text_delta(0, "x") for _ in range(deltas)],
        frames.output_item_done(0, message),
        frames.completed(response_id, [message]),
    ]


async def _serve_ws(conn: FakeConnection, settings: Settings, fail_warmup: bool) -> None:
    try:
        await _serve_ws_requests(conn, settings, fail_warmup)
    except ClientDisconnected:
        return  # the client has what it measured and went away


async def _serve_ws_requests(conn: FakeConnection, settings: Settings, fail_warmup: bool) -> None:
    count = 0
    while True:
        request = await conn.next_request()
        count += 1
        await trio.sleep(settings.delay)  # request in flight
        if request.get("generate") is False:
            if fail_warmup:
                await conn.send_error("warmup unavailable")
                continue
            await trio.sleep(settings.delay)
            await conn.send_warmup(f"warm-{count}")
            continue
        await trio.sleep(settings.think + settings.delay)  # think, then the first frame travels
        await conn.send_all(_answer(f"resp-{count}", settings.deltas))


async def serve_websocket(settings: Settings, *, fail_warmup: bool = False, task_status: Any) -> None:
    server = FakeResponsesServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        task_status.started(server)
        first = True
        while True:
            raw = await server.accept_raw()
            await trio.sleep(settings.delay * 2)  # TCP + upgrade round trip
            conn = await raw.accept()
            nursery.start_soon(_serve_ws, conn, settings, fail_warmup and first)
            first = False


async def serve_https(settings: Settings, *, task_status: Any) -> None:
    server = FakeResponsesServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        task_status.started(server)
        count = 0
        while True:
            request = await server.accept_http()
            count += 1
            nursery.start_soon(_answer_https, request, settings, count)


async def _answer_https(request: Any, settings: Settings, count: int) -> None:
    await trio.sleep(settings.delay * 2 + settings.think + settings.delay)
    await request.send_sse(_answer(f"resp-{count}", settings.deltas))


# -- the clients ----------------------------------------------------------------------------


async def bare_websocket(settings: Settings, server: FakeResponsesServer) -> float:
    """The floor: a raw trio-websocket client, already connected, sending one request."""
    async with trio_websocket.open_websocket_url(server.url, max_message_size=64 << 20) as ws:
        body = {"type": "response.create", "model": "gpt-5.5", "input": [], "stream": True}
        start = trio.current_time()
        await ws.send_message(json.dumps(body))
        while True:
            frame = json.loads(await ws.get_message())
            if frame["type"] == "response.output_text.delta":
                return trio.current_time() - start


async def _agent_first_token(config: ta.AgentConfig, *, wait_for_warmup: bool) -> float:
    async with trio.open_nursery() as nursery, ta.open_agent(config) as agent:
        first_token = trio.Event()
        warm = trio.Event()
        times: dict[str, float] = {}

        async def watch() -> None:
            async for event in agent.events:
                if event.kind in (ta.EventKind.MODEL_WARMUP_COMPLETED, ta.EventKind.MODEL_WARMUP_FAILED):
                    warm.set()
                if event.kind is ta.EventKind.ASSISTANT_DELTA and not first_token.is_set():
                    times["first"] = event.time
                    first_token.set()

        nursery.start_soon(watch)
        if wait_for_warmup:
            await warm.wait()
        start = trio.current_time()
        turn = await agent.prompt("hello")
        await first_token.wait()
        await turn.result()
        return times["first"] - start


async def openai_sdk(settings: Settings, server: FakeResponsesServer, workspace: str) -> float:
    """The reference client: the ``openai`` SDK's streaming Responses call (one client
    per run, like an application creating its client for a session)."""
    import openai

    client = openai.AsyncOpenAI(api_key="bench", base_url=server.http_base_url, max_retries=0)
    try:
        start = trio.current_time()
        first: float | None = None
        stream = await client.responses.create(model="gpt-5.5", input="hello", stream=True)
        async for event in stream:  # read to the end: the SDK's generators dislike early exits
            if event.type == "response.output_text.delta" and first is None:
                first = trio.current_time() - start
        if first is None:
            raise RuntimeError("the openai SDK stream ended without a text delta")
        return first
    finally:
        await client.close()


def _config(server: FakeResponsesServer, workspace: str, **responses: Any) -> ta.AgentConfig:
    if responses.get("transport") is ta.Transport.HTTPS:
        resp = ta.Responses(api_base_url=server.http_base_url, **responses)
    else:
        resp = ta.Responses(websocket_url=server.url, **responses)
    return ta.AgentConfig(auth="bench", workspace=workspace, responses=resp, tools=ta.Tools.empty())


PATHS: dict[str, tuple[str, Callable[..., Any]]] = {
    "bare_socket_floor": ("ws", bare_websocket),
    "startup_prewarm": ("ws", lambda s, srv, ws: _agent_first_token(_config(srv, ws), wait_for_warmup=True)),
    "cold_connect": ("ws", lambda s, srv, ws: _agent_first_token(_config(srv, ws), wait_for_warmup=False)),
    "warmup_fallback": ("ws_fail", lambda s, srv, ws: _agent_first_token(_config(srv, ws), wait_for_warmup=True)),
    "https_store": ("https", lambda s, srv, ws: _agent_first_token(
        _config(srv, ws, transport=ta.Transport.HTTPS), wait_for_warmup=False)),
    "https_ephemeral": ("https", lambda s, srv, ws: _agent_first_token(
        _config(srv, ws, transport=ta.Transport.HTTPS, store=False, history=ta.History.FULL_REPLAY),
        wait_for_warmup=False)),
    "https_shared_client": ("https", lambda s, srv, ws: _agent_first_token(
        _config(srv, ws, transport=ta.Transport.HTTPS, http_client=_shared_client()), wait_for_warmup=False)),
    "openai_sdk_https": ("https", openai_sdk),
}


def available_paths() -> list[str]:
    """Every path whose client is installed (the ``openai`` SDK is an optional extra)."""
    try:
        import openai  # noqa: F401
    except ImportError:
        return [name for name in PATHS if name != "openai_sdk_https"]
    return list(PATHS)

_SHARED: list[Any] = []


def _shared_client() -> Any:
    import httpx

    if not _SHARED:
        _SHARED.append(httpx.AsyncClient())
    return _SHARED[0]


async def _once(name: str, settings: Settings, workspace: str) -> float:
    kind, client = PATHS[name]
    async with trio.open_nursery() as nursery:
        if kind == "https":
            server = await nursery.start(serve_https, settings)
        else:
            server = await nursery.start(lambda task_status: serve_websocket(
                settings, fail_warmup=kind == "ws_fail", task_status=task_status))
        if name == "bare_socket_floor":
            sample: float = await client(settings, server)
        else:
            sample = await client(settings, server, workspace)
        nursery.cancel_scope.cancel()
    return sample


async def _measure(name: str, settings: Settings, runs: int, workspace: str) -> tuple[list[float], float]:
    """One discarded run (lazy imports, first-use caches), then ``runs`` timed runs."""
    await _once(name, settings, workspace)
    cpu_start = time.process_time()
    samples = [await _once(name, settings, workspace) for _ in range(runs)]
    return samples, (time.process_time() - cpu_start) / runs


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(runs: int, settings: Settings, paths: list[str] | None = None) -> list[dict[str, Any]]:
    paths = available_paths() if paths is None else paths
    if "openai_sdk_https" in paths:
        import openai  # noqa: F401  # import once, outside the timed runs
    rows = []
    with tempfile.TemporaryDirectory() as workspace:
        try:
            results = {name: await _measure(name, settings, runs, workspace) for name in paths}
        finally:
            for client in _SHARED:
                await client.aclose()
            _SHARED.clear()
    floor = statistics.median(results["bare_socket_floor"][0])
    for name, (samples, cpu) in results.items():
        p50 = statistics.median(samples)
        rows.append({
            "path": name, "p50_ms": round(p50 * 1000, 2), "p99_ms": round(_pct(samples, 0.99) * 1000, 2),
            "ratio_to_floor": round(p50 / floor, 2), "cpu_ms_per_turn": round(cpu * 1000, 2), "runs": runs,
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trio-agent bench", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--delay-ms", type=float, default=5.0, help="one-way network delay")
    parser.add_argument("--think-ms", type=float, default=20.0, help="server time before the first delta")
    parser.add_argument("--deltas", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = parser.parse_args(argv)
    settings = Settings(args.delay_ms / 1000, args.think_ms / 1000, args.deltas)
    rows = trio.run(run, args.runs, settings)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"first-token latency, {args.runs} runs, delay {args.delay_ms} ms one way, think {args.think_ms} ms")
    print(f"{'path':<20}{'p50 ms':>10}{'p99 ms':>10}{'x floor':>10}{'cpu ms/turn':>13}")
    for row in rows:
        print(f"{row['path']:<20}{row['p50_ms']:>10}{row['p99_ms']:>10}{row['ratio_to_floor']:>10}"
              f"{row['cpu_ms_per_turn']:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
