"""Streaming tool dispatch (issue 27 item 1): how soon a tool starts, and what a
tool-calling step costs, before and after, against the bare floor.

The server (this module with ``--serve``, a child process on 127.0.0.1: the test kit's
``FakeResponsesServer`` over real sockets) answers a request without a tool output with a
response that streams a tool call and then, after ``--think`` of server time, a trailing
assistant message of 20 deltas and ``response.completed``; a request carrying the call's
output gets a short final answer. The tool sleeps ``--tool`` seconds. Measured per turn:

- **item -> tool start**: from the call's ``response.output_item.done`` reaching the agent
  (its ``api.event``, Trio's clock) to the tool handler starting. Before: the tool
  starts once the whole response has ended, about ``--think`` later. After: at once.
- **step**: from the first request on the wire (``model.call.started``) to the second,
  which carries the tool's output: the model call streaming the call, the trailing
  items and the tool. Before: think + tool in sequence; after: the longer of the two.

Each side runs in a client process of its own (``--client``), turns alternating with a
bare client's in the same process -- the floor: a trio-websocket client, or an httpx
client reading the SSE lines, that starts the tool when its item arrives and sends the
next request once the response has completed and the tool has finished. "after" is
this tree; "before" is another tree's Python given with ``--before`` (a worktree of the
branch point with its own venv, which imports its own ``trio_agent``): both run this
file as a script, so the client code uses only the public API both have. Rounds of the
two sides alternate on the same server. Without ``--before`` only "after" and the floor
are measured.

    python -m benchmarks.tool_dispatch [--turns 20] [--rounds 3] [--before /path/to/before/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
TRANSPORTS = ("websocket", "https")


# -- the server (child process) -----------------------------------------------------------


def _is_continuation(body: dict[str, Any]) -> bool:
    items = body.get("input") or []
    return bool(items) and isinstance(items[-1], dict) and items[-1].get("type") == "function_call_output"


def _answer(count: int, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The frames before the think and after it (the call streams before it)."""
    from trio_agent.testing import frames

    response_id = f"resp-{count}"
    if _is_continuation(body):
        final = frames.assistant_message("done", item_id=f"msg_{response_id}")
        return [], [frames.response_created(response_id), frames.output_item_done(0, final),
                    frames.completed(response_id, [final])]
    call = frames.function_call(f"call-{count}", "work", "{}", item_id=f"fc_{response_id}")
    message = frames.assistant_message("x" * 20, item_id=f"msg_{response_id}")
    return [frames.response_created(response_id), frames.output_item_done(0, call)], [
        frames.output_item_added(1, {**message, "content": []}), *[frames.text_delta(1, "x") for _ in range(20)],
        frames.output_item_done(1, message), frames.completed(response_id, [call, message])]


async def _serve(think: float) -> None:
    from trio_agent.testing import ClientDisconnected, FakeResponsesServer

    server, http_server = FakeResponsesServer(), FakeResponsesServer()  # one each: accept() takes any connection
    count = 0

    async def websocket(conn: Any) -> None:
        nonlocal count
        try:
            while True:
                body = dict(await conn.next_request())
                if body.get("generate") is False:
                    await conn.send_warmup("resp-warmup")
                    continue
                count += 1
                before, after = _answer(count, body)
                await conn.send_all(before)
                if before:
                    await trio.sleep(think)
                await conn.send_all(after)
        except ClientDisconnected:
            return

    async def https(request: Any) -> None:
        nonlocal count
        count += 1
        before, after = _answer(count, dict(request.body))
        await request.start_stream()
        for frame in before:
            await request.send_event(frame)
        if before:
            await trio.sleep(think)
        for frame in after:
            await request.send_event(frame)
        await request.finish()

    async def accept(nursery: trio.Nursery) -> None:
        while True:
            nursery.start_soon(websocket, await server.accept())

    async def accept_http(nursery: trio.Nursery) -> None:
        while True:
            nursery.start_soon(https, await http_server.accept_http())

    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        await nursery.start(http_server.serve)
        nursery.start_soon(accept, nursery)
        nursery.start_soon(accept_http, nursery)
        print(json.dumps({"ws": server.url, "http": http_server.http_base_url}), flush=True)
        async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
            while await stdin.receive_some():  # until EOF: the benchmark is done
                pass
        nursery.cancel_scope.cancel()


# -- one side's client (child process; only the public API of both trees) ----------------------


async def _agent_turns(urls: dict[str, str], transport: str, turns: int, tool_seconds: float,
                       workspace: str) -> list[tuple[float, float]]:
    """(item -> tool start, step) of each turn."""
    import trio_agent as ta

    started: list[float] = []

    async def work(ctx: Any, args: Any) -> str:
        started.append(trio.current_time())
        await trio.sleep(tool_seconds)
        return "worked"

    if transport == "websocket":
        responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=urls["ws"])
    else:
        responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS,
                                 api_base_url=urls["http"], store=True)
    config = ta.AgentConfig(auth="bench", workspace=Path(workspace), responses=responses, session_id="bench",
                            tools=ta.Tools.empty().function("work", "Work.", {"type": "object"}, work))
    arrived: list[float] = []
    calls: list[float] = []
    samples: list[tuple[float, float]] = []
    ended = [trio.Event()]  # the turn's terminal event reached the consumer (all before it did)

    async def watch(agent: Any) -> None:
        async for event in agent.events:
            if event.kind.is_terminal:
                ended[0].set()
            elif event.kind is ta.EventKind.MODEL_CALL_STARTED:
                calls.append(event.time)
            elif event.kind is ta.EventKind.API_EVENT and event.payload.get("direction") == "inbound":
                frame = event.payload.get("event") or {}
                if frame.get("type") == "response.output_item.done" and \
                        (frame.get("item") or {}).get("type") == "function_call":
                    arrived.append(event.time)

    async with trio.open_nursery() as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(watch, agent)
        for index in range(turns + 2):  # two turns to warm up, not sampled
            del arrived[:], calls[:], started[:]
            ended[0] = trio.Event()
            turn = await agent.prompt(f"turn {index}")
            await turn.result()
            await ended[0].wait()
            if index >= 2:
                samples.append((started[0] - arrived[0], calls[1] - calls[0]))
        nursery.cancel_scope.cancel()
    return samples


async def _floor_turns(urls: dict[str, str], transport: str, turns: int,
                       tool_seconds: float) -> list[tuple[float, float]]:
    """The bare client: the tool starts when its item arrives; the next request goes
    once the response completed and the tool finished."""
    samples: list[tuple[float, float]] = []
    first = {"type": "response.create", "model": "bench", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]}
    second = {**first, "input": [{"type": "function_call_output", "call_id": "c", "output": "worked"}]}

    async def tool(done: trio.Event, start: list[float]) -> None:
        start.append(trio.current_time())
        await trio.sleep(tool_seconds)
        done.set()

    def on_frame(frame: dict[str, Any], nursery: trio.Nursery, done: trio.Event, marks: list[float]) -> bool:
        if frame["type"] == "response.output_item.done" and frame["item"]["type"] == "function_call":
            marks.append(trio.current_time())
            nursery.start_soon(tool, done, marks)
        return bool(frame["type"] == "response.completed")

    if transport == "websocket":
        import trio_websocket

        async with trio_websocket.open_websocket_url(urls["ws"]) as ws:

            async def exchange(body: dict[str, Any], read: Callable[[dict[str, Any]], bool]) -> None:
                await ws.send_message(json.dumps(body))
                while not read(json.loads(await ws.get_message())):
                    pass

            await _floor_loop(exchange, first, second, turns, on_frame, samples)
        return samples
    import httpx

    async with httpx.AsyncClient() as client:

        async def post(body: dict[str, Any], read: Callable[[dict[str, Any]], bool]) -> None:
            async with client.stream("POST", urls["http"] + "/responses", content=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"}) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]" and read(json.loads(line[6:])):
                        break

        await _floor_loop(post, first, second, turns, on_frame, samples)
    return samples


async def _floor_loop(exchange: Any, first: dict[str, Any], second: dict[str, Any], turns: int,
                      on_frame: Any, samples: list[tuple[float, float]]) -> None:
    for index in range(turns + 2):
        done, marks = trio.Event(), list[float]()
        async with trio.open_nursery() as nursery:
            sent = trio.current_time()
            await exchange(first, functools.partial(on_frame, nursery=nursery, done=done, marks=marks))
            await done.wait()
            step = trio.current_time() - sent
            await exchange(second, lambda frame: frame["type"] == "response.completed")
        if index >= 2:
            samples.append((marks[1] - marks[0], step))


async def _client(urls: dict[str, str], transport: str, turns: int, tool_seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as workspace:
        ours = await _agent_turns(urls, transport, turns, tool_seconds, workspace)
    floor = await _floor_turns(urls, transport, turns, tool_seconds)
    return {"ours": ours, "floor": floor}


# -- the orchestration (this tree) ----------------------------------------------------------


def _side(python: str, urls: dict[str, str], transport: str, turns: int, tool_seconds: float) -> dict[str, Any]:
    out = subprocess.run(
        [python, str(Path(__file__).resolve()), "--client", json.dumps(urls), "--transport", transport,
         "--turns", str(turns), "--tool", str(tool_seconds)],
        cwd=tempfile.gettempdir(), check=True, capture_output=True, text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def measure(turns: int, rounds: int, think: float, tool_seconds: float, before: str | None) -> str:
    from ._common import record_summary, table

    server = subprocess.Popen([sys.executable, "-m", "benchmarks.tool_dispatch", "--serve", "--think", str(think)],
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        urls = json.loads(server.stdout.readline())
        sides = {"after": sys.executable, **({"before": before} if before else {})}
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(rounds):
            for transport in TRANSPORTS:
                for side, python in sides.items():
                    result = _side(python, urls, transport, turns, tool_seconds)
                    samples.setdefault((transport, side), []).extend(map(tuple, result["ours"]))
                    if side == "after":
                        samples.setdefault((transport, "floor"), []).extend(map(tuple, result["floor"]))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    rows, summary = [], []
    for transport in TRANSPORTS:
        for name in ("before", "after", "floor"):
            got = samples.get((transport, name))
            if got:
                starts, steps = [s for s, _ in got], [s for _, s in got]
                rows.append([transport, name, f"{_p50(starts):.2f}", f"{max(starts) * 1000:.2f}",
                             f"{_p50(steps):.2f}", f"{max(steps) * 1000:.2f}", str(len(got))])
        after, floor = samples[(transport, "after")], samples[(transport, "floor")]
        start_after, step_after = _p50([s for s, _ in after]), _p50([s for _, s in after])
        step_floor = _p50([s for _, s in floor])
        summary.append([f"tool start after its item, {transport}", f"{start_after:.2f} ms",
                        f"{_p50([s for s, _ in floor]):.2f} ms", f"{start_after - _p50([s for s, _ in floor]):+.2f} ms",
                        "at the item (floor)"])
        summary.append([f"tool-calling step, {transport}", f"{step_after:.1f} ms", f"{step_floor:.1f} ms",
                        f"{step_after / step_floor:.2f}", "max(think, tool) (floor)"])
        if (transport, "before") in samples:
            previous = samples[(transport, "before")]
            summary.append([f"tool-calling step before/after, {transport}", f"{step_after:.1f} ms",
                            f"before {_p50([s for _, s in previous]):.1f} ms",
                            f"{_p50([s for _, s in previous]) / step_after:.2f}x faster", "think + tool -> max"])
    record_summary(summary)
    header = ["transport", "side", "item->start p50 ms", "max", "step p50 ms", "max", "n"]
    return "\n\n".join([
        f"server think after the call {think * 1000:.0f} ms, tool {tool_seconds * 1000:.0f} ms, "
        f"{turns} turns x {rounds} rounds per side",
        table("streamed tool dispatch: item -> tool start, and the tool-calling step", header, rows),
        table("summary", ["metric", "ours", "floor / before", "added / ratio", "target"], summary),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="sampled turns per client run")
    parser.add_argument("--rounds", type=int, default=3, help="client runs per side and transport")
    parser.add_argument("--think", type=float, default=0.05, help="server think time after the call (s)")
    parser.add_argument("--tool", type=float, default=0.03, help="how long the tool takes (s)")
    parser.add_argument("--before", default=None, help="the Python of a tree to compare with (its own venv)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--transport", default="websocket", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        trio.run(_serve, args.think)
    elif args.client is not None:
        result = trio.run(_client, json.loads(args.client), args.transport, args.turns, args.tool)
        print(json.dumps(result))
    else:
        print(measure(args.turns, args.rounds, args.think, args.tool, args.before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
