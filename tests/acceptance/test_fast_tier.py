"""Ports of codex ``websocket_v2_first_turn_*_fast_tier_after_startup_prewarm`` and
``websocket_v2_next_turn_uses_updated_service_tier``
(``seeds/codex_agent_websocket_tests.rs.txt``): a turn's service tier may differ from the
startup warmup's, and from the previous turn's.

codex's per-turn ``submit_turn_with_service_tier(text, tier)`` is ``set_fast_mode``
before the prompt (a prompt keeps the fast mode current when it is accepted, SPEC sec. 2);
``config.service_tier = Some(Fast)`` is ``AgentConfig(fast_mode=True)``.

SPEC sec. 2 overrides one fact of these seeds: codex drops the ``previous_response_id``
when a turn's tier differs from the warmup's or the previous turn's, while
"thinking and fast-mode changes do not break the chain" here -- the first turn chains on
the warmup and sends only items 2-3 and the prompt, a later turn chains on the turn before
and sends only its prompt. Every other fact is the seed's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeResponsesServer

from .._codex_frames import ev_assistant_message, ev_completed, ev_response_created
from ..conftest import make_config, scripted


@pytest.mark.parametrize(
    ("configured_fast", "turn_fast", "answer"),
    [
        # websocket_v2_first_turn_uses_updated_fast_tier_after_startup_prewarm
        (False, True, "fast"),
        # websocket_v2_first_turn_drops_fast_tier_after_startup_prewarm
        (True, False, "standard"),
    ],
    ids=["uses_updated_fast_tier", "drops_fast_tier"],
)
async def test_websocket_v2_first_turn_service_tier_after_startup_prewarm(
    server: FakeResponsesServer, workspace: Path, configured_fast: bool, turn_fast: bool, answer: str
) -> None:
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        bodies.append(warmup)
        await conn.send_all([ev_response_created("warm-1"), ev_completed("warm-1")])
        bodies.append(await conn.next_request())
        await conn.send_all([ev_response_created("resp-1"), ev_assistant_message("msg-1", answer),
                             ev_completed("resp-1")])
        with pytest.raises(ClientDisconnected):
            bodies.append(await conn.next_request())  # nothing more on this connection

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, fast_mode=configured_fast)) as agent:
            await agent.set_fast_mode(turn_fast)
            assert (await (await agent.prompt("hello")).result()).final_message == answer

    assert len(server.handshakes) == 1
    assert len(bodies) == 2  # the warmup and the first turn, on that one connection
    warmup, first_turn = bodies
    assert warmup["type"] == "response.create"
    assert warmup["generate"] is False
    assert warmup.get("service_tier") == ("priority" if configured_fast else None)
    assert ("service_tier" in warmup) is configured_fast

    assert first_turn["type"] == "response.create"
    assert first_turn.get("service_tier") == ("priority" if turn_fast else None)
    assert ("service_tier" in first_turn) is turn_fast
    # The seed: ``previous_response_id`` is None (codex restarts the chain for a new tier).
    # SPEC sec. 2 overrides it: the tier change keeps the chain on the warmup.
    assert first_turn["previous_response_id"] == "warm-1"
    assert len(first_turn["input"]) == 3  # the seed: non-empty; here items 2-3 and the prompt (SPEC sec. 3)
    assert first_turn["input"][-1]["content"][0]["text"] == "hello"


async def test_websocket_v2_next_turn_uses_updated_service_tier(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """Codex ``websocket_v2_next_turn_uses_updated_service_tier``: ``first`` in fast
    mode, then ``second`` without, on one connection after the startup warmup.

    SPEC sec. 2 overrides the seed's two ``previous_response_id == None``: a tier change
    does not break the chain, so ``first`` chains on the warmup and ``second`` on
    ``first``'s response (each sending only what is new). Every other fact is the seed's."""
    bodies: list[dict[str, Any]] = []
    warmup_seen = trio.Event()

    async def script() -> None:
        conn = await server.accept()
        bodies.append(await conn.next_request())
        warmup_seen.set()
        await conn.send_all([ev_response_created("warm-1"), ev_completed("warm-1")])
        bodies.append(await conn.next_request())
        await conn.send_all([ev_response_created("resp-1"), ev_assistant_message("msg-1", "fast"),
                             ev_completed("resp-1")])
        bodies.append(await conn.next_request())
        await conn.send_all([ev_response_created("resp-2"), ev_assistant_message("msg-2", "standard"),
                             ev_completed("resp-2")])
        with pytest.raises(ClientDisconnected):
            bodies.append(await conn.next_request())  # nothing more on this connection

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        await warmup_seen.wait()  # server.wait_for_request(0, 0)
        warmup = bodies[0]
        assert warmup["type"] == "response.create"
        assert warmup["generate"] is False
        assert "service_tier" not in warmup
        # submit_turn_with_service_tier("first", Some(Fast)), then ("second", None).
        await agent.set_fast_mode(True)
        assert (await (await agent.prompt("first")).result()).final_message == "fast"
        await agent.set_fast_mode(False)
        assert (await (await agent.prompt("second")).result()).final_message == "standard"

    assert len(server.handshakes) == 1
    assert len(bodies) == 3
    first_turn, second_turn = bodies[1:]

    assert first_turn["type"] == "response.create"
    assert first_turn["service_tier"] == "priority"
    # The seed: None (codex restarts the chain for a new tier). SPEC sec. 2: the chain holds.
    assert first_turn["previous_response_id"] == "warm-1"
    assert len(first_turn["input"]) == 3  # the seed: non-empty; here items 2-3 and the prompt
    assert first_turn["input"][-1]["content"][0]["text"] == "first"

    assert second_turn["type"] == "response.create"
    assert "service_tier" not in second_turn
    # The seed: None. SPEC sec. 2: chained on the first turn's response, the prompt alone.
    assert second_turn["previous_response_id"] == "resp-1"
    assert [item["content"][0]["text"] for item in second_turn["input"]] == ["second"]
