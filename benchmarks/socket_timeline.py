"""Where a warm turn's time goes on the socket, ours beside the bare client (issue 13, item 1).

Both clients sit on the same ``trio.SocketStream`` class; this script stamps its
``send_all`` and ``receive_some`` (``time.perf_counter``) and, for the agent, the
entry of the runtime's steps on the way to the socket (the runner's ``_drive``, the
model call, the attempt slot, the body and its text, the exchange, the link's
``send_text``). Turns alternate, agent then bare, on one warm connection each (the
agent with ``AgentConfig(api_events=False)``), and each mark is printed as the median
over the turns of microseconds since the turn began: the first send, the last byte
sent, the first read after it, the last read, the end (``turn.result()`` returned /
``response.completed`` parsed), and the number of reads and sends.

This is the profile behind the README's notes on the rows that miss at 25 ms: after
the idle wait, every step runs about twice as slow for both clients.

    /work/main/.venv/bin/python -m benchmarks.socket_timeline [--rtt-ms 25] [--transport ws|https] [--turns 100]
"""

from __future__ import annotations

import argparse
import functools
import inspect
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import httpx
import trio

import trio_agent as ta

from ._common import BareHttp, Settings, bench_config, open_bare_websocket, open_bench_server, open_warm_agent

Marks = list[tuple[str, float]]
_marks: Marks = []


def _stamp_socket() -> None:
    cls: Any = trio.SocketStream
    send, receive = cls.send_all, cls.receive_some

    async def send_all(self: Any, data: Any) -> None:
        _marks.append(("send", time.perf_counter()))
        await send(self, data)
        _marks.append(("sent", time.perf_counter()))

    async def receive_some(self: Any, max_bytes: int | None = None) -> Any:
        data = await receive(self, max_bytes)
        _marks.append(("recv", time.perf_counter()))
        return data

    cls.send_all, cls.receive_some = send_all, receive_some


def _stamp_steps() -> None:
    """The agent's steps to the socket, stamped at entry (names as printed)."""
    from trio_agent._runtime._model import _attempt, _sampling, _websocket_exchange
    from trio_agent._runtime._model import _client as _model
    from trio_agent._runtime._turns import _runner
    from trio_agent._transport import websocket

    runner = next(c for c in vars(_runner).values() if isinstance(c, type) and hasattr(c, "_drive"))
    sampler = next(c for c in vars(_sampling).values() if isinstance(c, type) and hasattr(c, "generate"))
    steps: list[tuple[Any, str, str]] = [
        (runner, "_drive", "drive"), (sampler, "generate", "call"), (_attempt.Held, "__aenter__", "slot"),
        (_model.ModelClient, "body", "body"), (_model.ModelClient, "body_text", "text"),
        (_model.ModelClient, "feed", "feed"), (_websocket_exchange.WebSocketExchange, "run", "exchange"),
        (websocket.WebSocketLink, "send_text", "send_text"),
    ]
    for cls, name, label in steps:
        setattr(cls, name, _stamped(getattr(cls, name), label))


def _stamped(original: Callable[..., Any], label: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def stamped_async(*args: Any, **kwargs: Any) -> Any:
            _marks.append((label, time.perf_counter()))
            return await original(*args, **kwargs)
        return stamped_async

    @functools.wraps(original)
    def stamped(*args: Any, **kwargs: Any) -> Any:
        _marks.append((label, time.perf_counter()))
        return original(*args, **kwargs)
    return stamped


def _row(start: float, end: float, marks: Marks) -> dict[str, float]:
    row: dict[str, float] = {}
    for name, at in marks:
        if name not in ("send", "sent", "recv") and name not in row:
            row[name] = at - start
    sends = [at for name, at in marks if name == "send"]
    sent = [at for name, at in marks if name == "sent"]
    reads = [at for name, at in marks if name == "recv" and sent and at > sent[-1]]
    if sends:
        row["first send"] = sends[0] - start
    if sent:
        row["last sent"] = sent[-1] - start
    if reads:
        row["first read"], row["last read"] = reads[0] - start, reads[-1] - start
    row["end"] = end - start
    row["reads"], row["sends"] = len(reads), len(sends)
    return row


async def _timed(turn: Callable[[], Awaitable[object]]) -> dict[str, float]:
    _marks.clear()
    start = time.perf_counter()
    await turn()
    end = time.perf_counter()
    return _row(start, end, list(_marks))


def _medians(rows: list[dict[str, float]]) -> str:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    parts = []
    for key in keys:
        values = [row[key] for row in rows if key in row]
        value = statistics.median(values)
        parts.append(f"{key} {value:.0f}" if key in ("reads", "sends") else f"{key} {value * 1e6:.0f}")
    return ", ".join(parts)


async def measure(rtt: float, transport: str, turns: int) -> str:
    with tempfile.TemporaryDirectory() as workspace:
        async with open_bench_server(Settings(delay=rtt / 2, think=0.0, deltas=20)) as server:
            https = transport == "https"
            extra: dict[str, Any] = {"transport": ta.Transport.HTTPS, "store": True} if https else {}
            config = attrs.evolve(bench_config(server, workspace, **extra), api_events=False)
            async with open_warm_agent(config) as agent, httpx.AsyncClient() as client, \
                    open_bare_websocket(server.ws_url) as websocket:
                for _ in range(5):
                    await agent.turn()
                body = (await server.last_requests())["last"]["http" if https else "ws"]
                bare_http = BareHttp(client, server.http_base_url + "/responses")

                async def bare() -> object:
                    return await (bare_http.turn(body) if https else websocket.turn(body))

                for _ in range(5):
                    await bare()
                ours: list[dict[str, float]] = []
                floor: list[dict[str, float]] = []
                for _ in range(turns):
                    ours.append(await _timed(agent.turn))
                    floor.append(await _timed(bare))
    return (f"{transport} warm turn at {rtt * 1000:.0f} ms round trip, us since the turn began, median of {turns}:\n"
            f"  agent: {_medians(ours)}\n  bare:  {_medians(floor)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rtt-ms", type=float, default=25.0)
    parser.add_argument("--transport", choices=["ws", "https"], default="ws")
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args(argv)
    _stamp_socket()
    _stamp_steps()
    print(trio.run(measure, args.rtt_ms / 1000, args.transport, args.turns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
