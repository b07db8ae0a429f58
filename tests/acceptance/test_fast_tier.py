"""Ports of codex ``websocket_v2_first_turn_*_fast_tier_after_startup_prewarm``
(``seeds/codex_agent_websocket_tests.rs.txt``): the first turn's service tier may differ
from the startup warmup's.

codex's per-turn ``submit_turn_with_service_tier(text, tier)`` is ``set_fast_mode``
before the prompt (a prompt keeps the fast mode current when it is accepted, SPEC sec. 2);
``config.service_tier = Some(Fast)`` is ``AgentConfig(fast_mode=True)``.

SPEC sec. 2 overrides one fact of both seeds: codex drops the warmup's
``previous_response_id`` when the first turn's tier differs from the warmup's, while
"thinking and fast-mode changes do not break the chain" here -- the first turn chains on
the warmup and sends only items 2-3 and the prompt. Every other fact is the seed's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeResponsesServer

from ..conftest import make_config, scripted


def ev_response_created(response_id: str) -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": response_id}}


def ev_completed(response_id: str) -> dict[str, Any]:
    usage = {"input_tokens": 0, "input_tokens_details": None, "output_tokens": 0,
             "output_tokens_details": None, "total_tokens": 0}
    return {"type": "response.completed", "response": {"id": response_id, "usage": usage}}


def ev_assistant_message(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "response.output_item.done", "item": {
        "type": "message", "role": "assistant", "id": item_id, "content": [{"type": "output_text", "text": text}]
    }}


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
