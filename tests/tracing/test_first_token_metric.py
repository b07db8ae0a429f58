"""The first-token histogram, one series per warmup path (MockClock: exact values)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

from ..conftest import make_config, scripted, warm
from .conftest import Traces


async def answer(conn: FakeConnection, response_id: str, think: float) -> None:
    await conn.next_request()
    await trio.sleep(think)
    message = await conn.send_assistant_output(0, f"msg-{response_id}", "final_answer", "hi")
    await conn.send_completed(response_id, [message])


async def test_first_token_latency_is_recorded_per_warmup_path(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await answer(conn, "resp-1", 0.25)  # chained on the startup warmup
        await answer(conn, "resp-2", 0.5)  # the same socket again
        await conn.drop()
        await answer(await server.accept(), "resp-3", 0.125)  # a new socket after the drop

    async with scripted(script, 30):
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            for prompt in ("one", "two", "three"):
                await (await agent.prompt(prompt)).result()

    points = {dict(p.attributes or {})["trio_agent.warmup.path"]: p for p in traces.histogram_points()}
    assert {path: (p.count, p.sum) for path, p in points.items()} == {
        "startup_prewarm": (1, 0.25), "warm_socket": (1, 0.5), "reconnect": (1, 0.125),
    }
    assert dict(points["startup_prewarm"].attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5.5",
        "trio_agent.transport": "responses_websocket_v2", "trio_agent.warmup.path": "startup_prewarm",
        "server.address": "127.0.0.1", "server.port": server.port,
    }


async def test_the_https_transport_is_its_own_path(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    async def script() -> None:
        request = await server.accept_http()
        await trio.sleep(0.5)
        message = frames.assistant_message("hi", item_id="msg-https")
        await request.send_sse([frames.output_item_done(0, message), frames.completed("resp-https", [message])])

    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, api_base_url=server.http_base_url)
    async with scripted(script, 30):
        async with ta.open_agent(make_config(server, workspace, responses=responses,
                                             tracing=traces.tracing)) as agent:
            await (await agent.prompt("over https")).result()

    (point,) = traces.histogram_points()
    assert dict(point.attributes or {})["trio_agent.warmup.path"] == "https"
    assert (point.count, point.sum) == (1, 0.5)
    assert traces.named("warmup gpt-5.5") == []  # HTTPS does not warm up
    (call,) = traces.named("chat gpt-5.5")
    assert call.attributes is not None
    assert dict(traces.one("agent /root").attributes or {})["trio_agent.transport"] == "responses_https_sse"
    assert f"{call.attributes['server.address']!s}:{call.attributes['server.port']!s}" in server.http_base_url


async def test_each_recordings_exemplar_names_the_turn_it_was_made_in(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    """The recordings are made after the turn (deferred), with the context current when
    its model call ended: an exemplar names that turn's span, not whatever is current
    when the batch runs."""

    async def script() -> None:
        conn = await warm(server)
        await answer(conn, "resp-1", 0.25)
        await answer(conn, "resp-2", 0.5)

    async with scripted(script, 30):
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            for prompt in ("one", "two"):
                await (await agent.prompt(prompt)).result()

    turns = {span.context.span_id: span for span in traces.named("invoke_agent /root")}
    assert len(turns) == 2
    by_value = {exemplar.value: exemplar.span_id for p in traces.histogram_points() for exemplar in p.exemplars}
    first, second = sorted(turns.values(), key=lambda s: s.start_time or 0)
    assert by_value == {0.25: first.context.span_id, 0.5: second.context.span_id}
