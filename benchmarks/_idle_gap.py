"""Is a warm turn's extra cost at 25 ms the round trip, or the idle wait? (issue 30 item 4)

``turn_overhead --idle-gap`` times warm turns of the agent (``api_events=False``, a
consumer reading ``agent.events``) and of the bare client, interleaved, on one transport
at a time, under three conditions: 0 ms RTT back to back; 0 ms RTT with the process idle
for 25 ms (``trio.sleep``) before every turn; 25 ms RTT back to back. If the second row
costs what the third does, the 25 ms penalty is the idleness -- the caches the process
loses to the rest of the machine while it waits, which a larger code path pays more for --
not the round trip (frames arriving differently, task hops per arrival).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import trio

import trio_agent as ta

from ._common import Settings, Timing, open_bench_server
from ._rounds import interleave
from ._turn_audit import WireStamps, open_warm_pair

CONDITIONS = ((0.0, 0.0), (0.0, 0.025), (0.025, 0.0))  # (rtt, idle gap before each turn)


async def idle_gap(rounds: int) -> str:
    out = [f"warm turns, api_events=False, agent and bare client interleaved, {rounds} pairs per row (p50):"]
    for transport in (ta.Transport.WEBSOCKET, ta.Transport.HTTPS):
        for rtt, gap in CONDITIONS:
            out.append(await _row(transport, rtt, gap, rounds))
    return "\n".join(out)


async def _row(transport: ta.Transport, rtt: float, gap: float, rounds: int) -> str:
    with tempfile.TemporaryDirectory() as workspace:
        async with open_bench_server(Settings(delay=rtt / 2, think=0.0, deltas=20)) as server, \
                open_warm_pair(server, workspace, transport) as (agent, bare):
            ours, floor = await interleave([_after(gap, agent.turn), _after(gap, bare)], rounds)
    total = [statistics.median(t.total for t in side) * 1000 for side in (ours, floor)]
    cpu = [statistics.median(t.cpu for t in side) * 1000 for side in (ours, floor)]
    return (f"  {transport.value:<22} rtt {rtt * 1000:2g} ms, idle {gap * 1000:2g} ms before each turn: "
            f"turn {total[0]:7.3f} vs {total[1]:7.3f} ms (added {total[0] - total[1]:+.3f}), "
            f"CPU {cpu[0]:.3f} vs {cpu[1]:.3f} ms ({cpu[0] / cpu[1]:.2f}x)")


def _after(gap: float, turn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Timing]]:
    async def run() -> Timing:
        if gap:
            await trio.sleep(gap)
        timing: Timing = await turn()
        return timing
    return run


# -- the client's own time, the server's reply time taken out (``turn_overhead --client-side``) --


async def client_side(rounds: int) -> str:
    """Warm turns of the agent and the bare client, interleaved (``_rounds``), at 0 and 25 ms,
    each turn split at the wire (``_turn_audit.WireStamps``): the *reply time* from the
    request's first byte handed to the socket to the answer's first bytes read, and the rest,
    the client's own time. On this shared machine the reply time (the bench server's timers,
    another process) spreads over milliseconds at 25 ms -- its median differs between two
    clients sending the same bytes by more than the +0.3 ms judged -- so the client-side
    added time (median of the paired differences) says what the runtime itself adds."""
    out = [f"warm turns, api_events=False, {rounds} interleaved pairs per row; ms p50 (paired: median of "
           "the per-round differences; reply: first byte sent -> first bytes read; client: turn minus reply)"]
    for transport in (ta.Transport.WEBSOCKET, ta.Transport.HTTPS):
        for rtt in (0.0, 0.025):
            out.append(await _split_row(transport, rtt, rounds))
    return "\n".join(out)


async def _split_row(transport: ta.Transport, rtt: float, rounds: int) -> str:
    stamps = WireStamps()

    def split(turn: Callable[[], Awaitable[Timing]]) -> Callable[[], Awaitable[tuple[float, float]]]:
        async def run() -> tuple[float, float]:
            stamps.clear()
            timing = await turn()
            reply = (stamps.first - stamps.sent) if stamps.first is not None and stamps.sent is not None else 0.0
            return timing.total, reply
        return run

    with tempfile.TemporaryDirectory() as workspace:
        async with open_bench_server(Settings(delay=rtt / 2, think=0.0, deltas=20)) as server, \
                open_warm_pair(server, workspace, transport) as (agent, bare):
            stamps.install()
            try:
                ours, floor = await interleave([split(agent.turn), split(bare)], rounds)
            finally:
                stamps.uninstall()

    def p50(values: list[float]) -> float:
        return statistics.median(values) * 1000

    total = p50([a[0] - b[0] for a, b in zip(ours, floor, strict=True)])
    client = p50([(a[0] - a[1]) - (b[0] - b[1]) for a, b in zip(ours, floor, strict=True)])
    return (f"  {transport.value:<22} rtt {rtt * 1000:2g} ms: turn {p50([t for t, _ in ours]):7.3f} vs "
            f"{p50([t for t, _ in floor]):7.3f} (paired added {total:+.3f}); reply {p50([r for _, r in ours]):7.3f} "
            f"vs {p50([r for _, r in floor]):7.3f}; client-side paired added {client:+.3f}")
