"""Ports of the warmup seeds: nanocodex warmup fallbacks and codex startup prewarm."""

from __future__ import annotations

from pathlib import Path

import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import assert_warmup, events_of, make_config, run_model, scripted


def assert_full_first_request(generation: dict) -> None:
    assert "previous_response_id" not in generation
    assert "generate" not in generation
    assert len(generation["input"]) == 5
    assert generation["input"][0]["type"] == "additional_tools"
    assert [item.get("role") for item in generation["input"][1:]] == ["developer", "developer", "user", "user"]


async def test_warmup_failure_falls_back_to_a_full_first_request(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        first = await server.accept()
        assert_warmup(await first.next_request())
        await first.send({"type": "error", "error": {"message": "prewarm unavailable"}})
        second = await server.accept()
        assert_full_first_request(await second.next_request())
        await second.send_final("resp-final")

    async with scripted(script):
        output = await run_model(server, workspace, "exercise warmup fallback")
    (failed,) = events_of(output, "model.warmup.failed")
    assert failed["error"] == "Responses API error: prewarm unavailable"
    assert [p["purpose"] for p in events_of(output, "model.connection.started")] == ["initial", "warmup_fallback"]
    (completed,) = events_of(output, "run.completed")
    assert completed["status"] == "completed"
    assert completed["connection_attempts"] == 2
    assert completed["websocket_reconnects"] == 1


async def test_warmup_connection_failure_falls_back_to_a_full_first_request(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        failed_prewarm = await server.accept_raw()
        await failed_prewarm.drop()
        conn = await server.accept()
        assert_full_first_request(await conn.next_request())
        await conn.send_final("resp-final")

    async with scripted(script):
        output = await run_model(server, workspace, "exercise warmup connection fallback")
    (connection_failed,) = events_of(output, "model.connection.failed")
    assert (connection_failed["purpose"], connection_failed["attempt"]) == ("initial", 1)
    assert len(events_of(output, "model.warmup.failed")) == 1
    assert [p["purpose"] for p in events_of(output, "model.connection.started")] == ["initial", "warmup_fallback"]
    (completed,) = events_of(output, "run.completed")
    assert completed["status"] == "completed"
    assert completed["connection_attempts"] == 2
    assert completed["websocket_reconnects"] == 1


async def _prewarm_then_turn(server: FakeResponsesServer, workspace: Path, *, accept_delay: float) -> None:
    """Codex ``websocket_first_turn_*``: one handshake, warmup then the turn's create."""

    async def script() -> None:
        conn = await server.accept(delay=accept_delay)
        await conn.next_request()
        await conn.send_all([frames.response_created("warm-1"), frames.completed("warm-1")])
        await conn.next_request()
        await conn.send_all([
            frames.response_created("resp-1"),
            frames.output_item_done(0, frames.assistant_message("hello", item_id="msg-1")),
            frames.completed("resp-1"),
        ])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(script)
        async with ta.open_agent(make_config(server, workspace)) as agent:
            result = await (await agent.prompt("hello")).result()
    assert result.final_message == "hello"
    assert len(server.handshakes) == 1
    assert len(server.requests) == 2
    warmup, turn = server.requests
    assert warmup["type"] == "response.create"
    assert warmup["generate"] is False
    # Tools travel in the warmup's additional_tools item (Responses Lite), never top-level.
    assert warmup["input"][0]["tools"]
    assert turn["type"] == "response.create"
    assert turn["previous_response_id"] == "warm-1"
    assert "generate" not in turn


async def test_websocket_first_turn_uses_startup_prewarm_and_create(
    server: FakeResponsesServer, workspace: Path
) -> None:
    with trio.fail_after(10):
        await _prewarm_then_turn(server, workspace, accept_delay=0)


async def test_websocket_first_turn_handles_handshake_delay_with_startup_prewarm(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(10):
        start = trio.current_time()
        await _prewarm_then_turn(server, workspace, accept_delay=0.15)
        # Only the handshake's delay passes on the virtual clock.
        assert trio.current_time() - start == 0.15


async def test_handshake_headers_carry_auth_beta_and_session(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-final")

    async with scripted(script):
        await run_model(server, workspace, "hi")
    (handshake,) = server.handshakes
    assert handshake.path == "/v1/responses"
    assert handshake.headers["authorization"] == "Bearer test-key"
    assert handshake.headers["openai-beta"] == "responses_websockets=2026-02-06"
    assert handshake.headers["session-id"] == "model-test"
    assert handshake.headers["x-client-request-id"] == "model-test"
