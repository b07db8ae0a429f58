"""A credential in a tool output: the cassette has ``<redacted>`` for it, a replay that
sends it again matches, and a mismatch diff shows the marker, never the secret (issue
29: diffs are redacted exactly like the cassette, so CI logs never get the key)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames, replay

from ..conftest import EventLog

API_KEY = "sk-test-0123456789abcdef"
ENV_TOKEN = "tok-env-fedcba9876543210"


def leak_tool(secret: str, suffix: str = "") -> ta.Tools:
    async def leak(ctx: ta.ToolContext, args: Any) -> str:
        return f"the key is {secret}{suffix}"

    return ta.Tools.default().function("leak", "Print the key.", {"type": "object"}, leak)


def agent_config(server: FakeResponsesServer, workspace: Path, tools: ta.Tools, **kw: Any) -> ta.AgentConfig:
    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url)
    return ta.AgentConfig(thinking=ta.Thinking.LOW, workspace=workspace, responses=responses,
                          session_id="redaction", tools=tools, **kw)


async def _model(server: FakeResponsesServer) -> None:
    conn = await server.accept()
    await conn.next_request()
    await conn.send_warmup("resp-warmup")
    await conn.next_request()
    await conn.send_completed("resp-1", [frames.function_call("call-1", "leak", "{}", item_id="fc_1")])
    await conn.next_request()
    await conn.send_final("resp-2", "done")


async def _record(server: FakeResponsesServer, workspace: Path, path: Path, secret: str, auth: str) -> None:
    log = EventLog()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_model, server)
            config = agent_config(server, workspace, leak_tool(secret), auth=auth, record=path)
            async with ta.open_agent(config) as agent:
                nursery.start_soon(log.consume, agent.events)
                assert (await (await agent.prompt("print the key")).result()).final_message == "done"
    assert any(secret in str(e.payload) for e in log.events)  # the tool really printed it


def _leaked(result: ta.testing.ReplayResult, secret: str) -> bool:
    """Whether the replayed agent really sent the secret (the positive control)."""
    return any(secret in str(e.payload) for e in result.events if e.kind is ta.EventKind.TOOL_RESULT)


async def test_an_api_key_in_a_tool_output_is_redacted_in_the_cassette_and_in_the_diff(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "leak.jsonl"
    await _record(server, workspace, path, API_KEY, API_KEY)
    text = path.read_text()
    assert API_KEY not in text and "the key is <redacted>" in text

    same = agent_config(server, workspace, leak_tool(API_KEY), auth=API_KEY)
    with trio.fail_after(20):
        result = await replay(path, config=same)
    assert _leaked(result, API_KEY)
    result.check()  # the secret sent again matches the recorded <redacted>

    changed = agent_config(server, workspace, leak_tool(API_KEY, suffix=" (changed)"), auth=API_KEY)
    with trio.fail_after(20):
        result = await replay(path, config=changed)
    assert _leaked(result, API_KEY)  # the replayed side held the key ...
    assert result.mismatch is not None
    shown = str(result.mismatch)
    assert API_KEY not in shown  # ... and the diff does not show it
    assert '+' in result.mismatch.diff and "the key is <redacted> (changed)" in result.mismatch.diff
    assert "-" in result.mismatch.diff and '"the key is <redacted>"' in result.mismatch.diff


async def test_a_credential_from_the_environment_is_redacted_on_both_sides(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool prints an environment credential the agent never sends (``replay()``
    without a config authenticates with a placeholder): still redacted."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_TOKEN)
    path = tmp_path / "leak.jsonl"
    await _record(server, workspace, path, ENV_TOKEN, API_KEY)
    assert ENV_TOKEN not in path.read_text()
    with trio.fail_after(20):
        result = await replay(path, workspace=workspace, tools=leak_tool(ENV_TOKEN))
    assert _leaked(result, ENV_TOKEN)
    result.check()
    with trio.fail_after(20):
        result = await replay(path, workspace=workspace, tools=leak_tool(ENV_TOKEN, suffix="!"))
    assert result.mismatch is not None and _leaked(result, ENV_TOKEN)
    assert ENV_TOKEN not in str(result.mismatch) and "<redacted>!" in result.mismatch.diff
