"""Fault matrix: an agent opened with its prompt in hand (``open_agent(config,
warmup=False)``, ``trio-agent run``) whose early socket or first request goes wrong.

No warmup stands between the socket and the prompt, so what a warmup's failure used to
absorb now meets the prompt's own attempt: a socket dropped before its handshake is
only reported and the prompt dials again; a socket dropped after the prompt left is a
retry that replays in full on a new one (the prompt once, never twice); an error frame
in answer to the prompt fails the turn. Each turn has exactly one terminal event, and
no warmup is ever sent.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..acceptance.test_warmup import assert_full_first_request
from ..conftest import events_of, make_config

TERMINAL = ("run.completed", "run.failed", "run.cancelled")


async def _run(
    server: FakeResponsesServer, workspace: Path, script: Callable[[], Awaitable[None]]
) -> tuple[str, ta.TurnResult | ta.AgentError]:
    """The server's ``script`` against an agent opened with its prompt in hand: its events
    as JSONL and the turn's outcome."""
    out = io.StringIO()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            async with ta.open_agent(make_config(server, workspace), warmup=False) as agent:
                nursery.start_soon(ta.write_jsonl, agent.events, out)
                turn = await agent.prompt("hello")
                try:
                    outcome: ta.TurnResult | ta.AgentError = await turn.result()
                except ta.AgentError as exc:
                    outcome = exc
    return out.getvalue(), outcome


def _one_terminal(output: str) -> str:
    ends = [kind for kind in TERMINAL for _ in events_of(output, kind)]
    assert len(ends) == 1, ends
    assert not events_of(output, "model.warmup.started")
    return ends[0]


async def test_a_socket_dropped_before_its_handshake_is_dialled_again_by_the_prompt(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        await (await server.accept_raw()).drop()
        conn = await server.accept()
        assert_full_first_request(await conn.next_request())
        await conn.send_final("resp-1", "second socket")

    output, outcome = await _run(server, workspace, script)
    assert isinstance(outcome, ta.TurnResult) and outcome.final_message == "second socket"
    assert _one_terminal(output) == "run.completed"
    assert len(events_of(output, "model.connection.failed")) == 1
    assert all(request.get("generate") is not False for request in server.requests)


async def test_a_socket_dropped_after_the_prompt_left_replays_it_once_on_a_new_one(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        first = await server.accept()
        assert_full_first_request(await first.next_request())
        await first.drop()  # before answering anything
        second = await server.accept()
        replay = await second.next_request()
        assert_full_first_request(replay)  # the prompt once: the history was not doubled
        await second.send_final("resp-2", "after the retry")

    output, outcome = await _run(server, workspace, script)
    assert isinstance(outcome, ta.TurnResult) and outcome.final_message == "after the retry"
    assert _one_terminal(output) == "run.completed"
    assert all(request.get("generate") is not False for request in server.requests)


async def test_an_error_frame_for_the_prompt_fails_the_turn_once(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await server.accept()
        assert_full_first_request(await conn.next_request())
        await conn.send_error("the model refused", code="invalid_prompt")

    output, outcome = await _run(server, workspace, script)
    assert isinstance(outcome, ta.TurnFailed)
    assert _one_terminal(output) == "run.failed"


async def test_an_early_handshake_rejected_is_that_socket_failing_the_prompt_dials_once_more(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """The early socket (opened before the agent is built, ``EarlyLink``) rejected with
    401: reported once as the startup socket's failure, as before; the prompt's own
    attempt is rejected too and fails the turn -- two handshakes, as before, never a
    third, and the key never shown."""
    async def script() -> None:
        for _ in range(2):
            raw = await server.accept_raw()
            await raw.reject(401, '{"error":{"message":"invalid api key test-key"}}')

    output, outcome = await _run(server, workspace, script)
    assert isinstance(outcome, ta.TurnFailed) and "HTTP 401" in str(outcome)
    assert _one_terminal(output) == "run.failed"
    assert len(events_of(output, "model.connection.failed")) == 2
    assert len(events_of(output, "model.connection.started")) == 2
    assert "test-key" not in output
    assert server.requests == []


async def test_a_server_silent_after_the_early_connect_fails_the_turn_on_the_handshake_timeout(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """TCP accepted, the handshake never answered: the early socket and then the
    prompt's own time out on ``handshake_timeout`` (no wait without a bound), one
    terminal event."""
    done = trio.Event()

    async def script() -> None:
        held = [await server.accept_raw() for _ in range(2)]
        await done.wait()
        del held

    config = make_config(server, workspace, responses=ta.Responses(
        profile=ta.Profile.OPENAI, websocket_url=server.url, handshake_timeout=5.0, max_attempts=1))
    out = io.StringIO()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(script)
        async with ta.open_agent(config, warmup=False) as agent:
            nursery.start_soon(ta.write_jsonl, agent.events, out)
            turn = await agent.prompt("hello")
            with pytest.raises(ta.TurnFailed, match="timed out"):
                await turn.result()
        done.set()
    assert _one_terminal(out.getvalue()) == "run.failed"
    assert len(events_of(out.getvalue(), "model.connection.failed")) == 2


async def test_an_early_https_connection_dropped_before_the_request_is_retried_on_a_new_one(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """HTTPS: the agent's first TCP connection, made before it was built
    (``_transport._early_dial``), is dropped by the server before any request: the
    prompt's request on it fails as on any dropped connection and is retried on a new
    one -- the prompt sent once answered, one terminal event."""
    bodies: list[str] = []

    async def script() -> None:
        await (await server.accept_raw()).drop()
        request = await server.accept_http()
        bodies.append(request.raw_body.decode())
        await request.send_final("resp-1", "second connection")

    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS,
                             api_base_url=server.http_base_url)
    out = io.StringIO()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            async with ta.open_agent(make_config(server, workspace, responses=responses), warmup=False) as agent:
                nursery.start_soon(ta.write_jsonl, agent.events, out)
                result = await (await agent.prompt("hello")).result()
    assert result.final_message == "second connection"
    assert _one_terminal(out.getvalue()) == "run.completed"
    assert len(bodies) == 1 and bodies[0].count('"hello"') == 1  # the prompt once
