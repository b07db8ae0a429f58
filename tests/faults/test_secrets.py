"""Fault matrix, class 7 (configuration half): secrets never show (issue 8).

A malformed API key is refused without echoing it; ``repr()`` of the configuration
and of every error never shows a credential; a credential the server echoes in its
error text is redacted before it reaches events, ``TurnFailed`` or logs.
(``exec_command`` scrubbing and output redaction are in tests/tools.)
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import scripted

KEY = "sk-test-SECRETKEY1234567890"


@pytest.mark.parametrize("key", [KEY + "\n", " " + KEY, KEY[:5] + " " + KEY[5:], KEY + "\x00", KEY + "é", "\t"])
def test_a_malformed_key_is_refused_without_echoing_it(tmp_path: Path, key: str) -> None:
    with pytest.raises(ta.ConfigError) as info:
        ta.AgentConfig(auth=key, workspace=tmp_path)
    message = str(info.value)
    assert "SECRETKEY" not in message
    if key.strip():
        assert key.strip() not in message
        assert "whitespace, control or non-ASCII character at position" in message
        assert "OPENAI_API_KEY" in message


class TokenSource:
    def __init__(self) -> None:
        self.token = "chatgpt-token-SECRET-0987654321"

    def validate(self) -> None:
        return None

    async def snapshot(self) -> ta.ChatGptAuthSnapshot:
        return ta.ChatGptAuthSnapshot(token=self.token, account_id="acct")

    async def recover_unauthorized(self, rejected: ta.ChatGptAuthSnapshot) -> None:
        return None

    def __repr__(self) -> str:
        return f"TokenSource(token={self.token!r})"  # a careless source: its repr holds the token


def test_reprs_never_show_a_credential(tmp_path: Path) -> None:
    config = ta.AgentConfig(auth=KEY, workspace=tmp_path)
    assert "SECRETKEY" not in repr(config)
    assert "<redacted 27 characters>" in repr(config)
    source = TokenSource()
    chatgpt = ta.AgentConfig(auth=ta.ChatGptAuth(source), workspace=tmp_path)
    for shown in (repr(chatgpt), repr(chatgpt.auth), repr(ta.ChatGptAuthSnapshot(token=source.token))):
        assert "SECRET" not in shown
    assert "<TokenSource>" in repr(chatgpt.auth)


async def test_a_key_the_server_echoes_is_redacted_from_errors_and_events(
    server: FakeResponsesServer, workspace: Path
) -> None:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}})

    async def script() -> None:
        for _ in range(2):  # the warmup's connection, then the first request's
            await (await server.accept_raw()).reject(401, body)

    out = io.StringIO()
    config = ta.AgentConfig(auth=KEY, workspace=workspace, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                  websocket_url=server.url))
    async with scripted(script) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(ta.write_jsonl, agent.events, out)
        with pytest.raises(ta.TurnFailed) as info:
            await (await agent.prompt("hi")).result()
    error = info.value.responses_error
    assert isinstance(error, ta.AuthenticationError)
    for shown in (str(info.value), repr(info.value), str(error), repr(error), out.getvalue()):
        assert KEY not in shown
    assert "Incorrect API key provided: <redacted>." in str(error)
    assert "<redacted>" in out.getvalue()


async def test_a_key_echoed_in_an_error_frame_is_redacted(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_error(f"key {KEY} is not allowed to use this model", code="model_not_allowed")

    config = ta.AgentConfig(auth=KEY, workspace=workspace, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                  websocket_url=server.url))
    with trio.fail_after(10):
        async with scripted(script), ta.open_agent(config) as agent:
            with pytest.raises(ta.TurnFailed) as info:
                await (await agent.prompt("hi")).result()
    assert KEY not in str(info.value) and "key <redacted> is not allowed" in str(info.value)
