"""A daemon worker waits for a warmup only when its agent sends one.

The generic profile (any host but OpenAI's, a loopback server such as LiteLLM or vLLM
included) and HTTPS send no ``generate: false`` warmup, so no warmup event ever comes:
a worker that waited for one said ``ready`` only after ``WARMUP_BOUND`` (30 s), and a
client that took that spare waited as long (found by benchmarks/warm_daemon, whose
loopback server selects the generic profile)."""

from __future__ import annotations

import pytest

import trio_agent as ta
from trio_agent.cli._run import _sends_warmup


@pytest.mark.parametrize(("responses", "warms"), [
    (ta.Responses(websocket_url="wss://api.openai.com/v1/responses"), True),
    (ta.Responses(websocket_url="ws://127.0.0.1:4000/v1/responses"), False),  # generic: LiteLLM on loopback
    (ta.Responses(websocket_url="ws://127.0.0.1:4000/v1/responses", profile=ta.Profile.OPENAI), True),
    (ta.Responses(api_base_url="https://api.openai.com/v1", transport=ta.Transport.HTTPS), False),
], ids=["openai-websocket", "generic-loopback", "openai-profile-on-loopback", "https"])
def test_a_worker_waits_for_a_warmup_only_when_one_is_sent(responses: ta.Responses, warms: bool) -> None:
    config = ta.AgentConfig(auth="test", workspace="/tmp", responses=responses)
    assert _sends_warmup(config) is warms
