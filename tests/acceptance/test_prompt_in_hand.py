"""``open_agent(config, warmup=False)``: the first prompt is in hand at the opening
(``trio-agent run``), so the agent opens its socket at startup but sends no warmup, and
the prompt is the first request on that socket, sent the moment it is open -- the
server sees it before it answered anything. The default (``warmup=True``), a prompt
given right away included, keeps the seeds' warmup-then-chain (``test_warmup``).

Without the change (``ModelClient.warmup`` ignoring ``request``), each of these fails
at its first ``next_request()``: the server sees a ``generate: false`` warmup first.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import events_of, make_config
from .test_warmup import assert_full_first_request


async def _run(config: ta.AgentConfig, *, warmup: bool, wait_for_socket: bool = False) -> str:
    """Open the agent (``warmup``), prompt it at once -- or once its socket is open --
    and return its events as JSONL."""
    out = io.StringIO()
    socket_open = trio.Event()

    async def watch(events: ta.AgentEvents) -> None:
        async for event in events:
            out.write(event.to_json_line())
            if event.kind is ta.EventKind.MODEL_CONNECTION_COMPLETED:
                socket_open.set()

    async with trio.open_nursery() as nursery, ta.open_agent(config, warmup=warmup) as agent:
        nursery.start_soon(watch, agent.events)
        if wait_for_socket:
            await socket_open.wait()
        result = await (await agent.prompt("hello")).result()
        assert result.final_message == "hello back"
    return out.getvalue()


async def _prompt_is_first(server: FakeResponsesServer, delay: float = 0.0) -> None:
    conn = await server.accept(delay=delay)
    first = await conn.next_request()  # nothing answered yet: no warmup was sent
    assert_full_first_request(first)
    assert json.dumps(first["input"]).endswith('"text": "hello"}]}]')  # the prompt, last
    await conn.send_final("resp-1", "hello back")


def _assert_no_warmup(output: str) -> None:
    assert [kind for kind in ("model.warmup.started", "model.warmup.completed", "model.warmup.failed")
            if events_of(output, kind)] == []
    assert [p["purpose"] for p in events_of(output, "model.connection.started")] == ["initial"]
    (completed,) = events_of(output, "run.completed")
    assert (completed["status"], completed["connection_attempts"], completed["response_attempts"]) == (
        "completed", 1, 1)


async def test_the_prompt_in_hand_is_the_first_request_once_the_socket_opens(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A slow handshake (codex's handshake-delay seed): the prompt waits for the socket,
    # not for a warmup after it.
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_prompt_is_first, server, 0.15)
        output = await _run(make_config(server, workspace), warmup=False)
    assert len(server.handshakes) == 1
    assert len(server.requests) == 1
    _assert_no_warmup(output)


async def test_a_first_prompt_given_after_the_socket_opened_sends_no_warmup_either(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_prompt_is_first, server)
        output = await _run(make_config(server, workspace), warmup=False, wait_for_socket=True)
    assert len(server.requests) == 1
    _assert_no_warmup(output)


async def test_the_default_still_warms_up_and_chains_the_prompt_given_at_once(
    server: FakeResponsesServer, workspace: Path
) -> None:
    # The contrast (SPEC sec. 3): without warmup=False the same prompt waits for the
    # warmup's answer and chains on it.
    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        assert warmup["generate"] is False
        await conn.send_warmup("resp-warm")
        turn = await conn.next_request()
        assert turn["previous_response_id"] == "resp-warm"
        await conn.send_final("resp-1", "hello back")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(script)
        output = await _run(make_config(server, workspace), warmup=True)
    assert len(events_of(output, "model.warmup.completed")) == 1
