"""The events announcing a request are emitted once it is on the wire (EventSink.defer),
in their documented place: ``run.started``, ``model.call.started``,
``model.attempt.started``, its outbound ``api.event``; anything emitted meanwhile (the
connect of a reconnecting turn, the startup warmup's events) comes after what was
announced before it, as if the announcement had been emitted at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm


def turn_kinds(log: EventLog, turn_id: int) -> list[str]:
    return [e.kind.value for e in log.events if e.turn_id == turn_id]


async def test_a_turn_announces_its_request_in_order(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        for n in (1, 2):
            await conn.next_request()
            await conn.send_final(f"resp-{n}", "hi")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        for text in ("first, while the warmup is out", "second, warm"):
            await (await agent.prompt(text)).result()
    for turn_id in (1, 2):
        kinds = turn_kinds(log, turn_id)
        assert kinds[:4] == ["run.started", "model.call.started", "model.attempt.started", "api.event"]
        assert kinds[-2:] == ["model.call.completed", "run.completed"]
    kinds = log.kinds()
    # The first turn started while the startup warmup was on the network; its request
    # waited for the warmup, whose events come between its start and its call.
    assert kinds.index("run.started") < kinds.index("model.warmup.completed") < kinds.index("model.call.started")
    assert [e.seq for e in log.events] == list(range(1, len(log.events) + 1))


async def test_a_reconnect_comes_after_the_turn_is_announced(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.drop()  # the socket dies before the turn: the turn connects again
        again = await server.accept()
        await again.next_request()
        await again.send_final("resp-1", "hi")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await log.wait_for("model.warmup.completed")
        await (await agent.prompt("hello")).result()
    kinds = log.kinds()
    started = kinds.index("run.started")
    reconnect = kinds.index("model.connection.started", started)  # the turn's own connect ...
    assert started < reconnect < kinds.index("model.call.started")  # ... between its start and its call
    announced = [k for k in turn_kinds(log, 1) if not k.startswith("model.connection")]
    assert announced[:3] == ["run.started", "model.call.started", "model.attempt.started"]
    assert kinds[-1] == "run.completed"


async def test_an_https_turn_announces_its_request_once_the_body_is_written(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """Over HTTPS the announcement waits for the request body to be written (httpcore's
    trace), not for the response: the server holds its answer until it has seen them."""
    log = EventLog()

    async def script() -> None:
        request = await server.accept_http()  # the whole body has arrived
        with trio.fail_after(10):
            await log.wait_for("model.attempt.started")
        await request.send_final("resp-1", "hi")

    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, api_base_url=server.http_base_url)
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace, responses=responses)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("hello")).result()).final_message == "hi"
    kinds = turn_kinds(log, 1)
    assert kinds[:4] == ["run.started", "model.call.started", "model.attempt.started", "api.event"]
    assert kinds[-2:] == ["model.call.completed", "run.completed"]


async def test_on_sent_is_called_once_after_the_body_and_before_the_head(server: FakeResponsesServer) -> None:
    from trio_agent._transport.https import HttpsTransport

    calls: list[str] = []
    sent = trio.Event()

    def on_sent() -> None:
        calls.append("sent")
        sent.set()

    async def script() -> None:
        request = await server.accept_http()
        with trio.fail_after(10):
            await sent.wait()  # told while the response is awaited: no head has been sent yet
        await request.send_final("resp-1", "hi")

    transport = HttpsTransport(server.http_base_url)
    async with scripted(script):
        async with transport.open_stream({"type": "response.create"}, [("Authorization", "Bearer k")],
                                         on_sent=on_sent) as chunks:
            calls.append("head")
            async for _ in chunks:
                pass
        await transport.aclose()
    assert calls == ["sent", "head"]


async def test_the_trace_leaves_the_request_once_the_body_is_written(
    server: FakeResponsesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trio_agent._transport import https

    traced: list[str] = []
    original = https._SentTrace.__call__

    async def recording(self: https._SentTrace, name: str, info: dict[str, Any]) -> None:
        traced.append(name.split(".", 1)[1])
        await original(self, name, info)

    monkeypatch.setattr(https._SentTrace, "__call__", recording)

    async def script() -> None:
        request = await server.accept_http()
        await request.send_final("resp-1", "hi")

    sent: list[str] = []
    transport = https.HttpsTransport(server.http_base_url)
    async with scripted(script):
        async with transport.open_stream({"type": "response.create"}, [("Authorization", "Bearer k")],
                                         on_sent=lambda: sent.append("sent")) as chunks:
            async for _ in chunks:
                pass
        await transport.aclose()
    assert sent == ["sent"], traced
    # httpcore traced the request up to its body, and nothing after (the head, the body, the close).
    assert traced[-1] == "send_request_body.complete", traced
    assert not any(name.startswith(("receive_response", "response_closed")) for name in traced)
