"""Snapshots, resume and rollouts (nanocodex ``serialized_session_*``), over real loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, scripted

THREAD = "019c0d31-c308-7d91-bff4-5dca82d15ac6"


def durable_config(server: FakeResponsesServer, **kw: Any) -> ta.AgentConfig:
    kw.setdefault("instructions", "durable instructions")
    return ta.AgentConfig(
        auth="test-key", thinking=ta.Thinking.LOW, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                          websocket_url=server.url), **kw
    )


async def test_serialized_session_and_rollout_share_committed_history(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    rollout_home = tmp_path / "rollout-home"

    async def script() -> None:
        original = await server.accept()
        warmup = await original.next_request()
        assert warmup["prompt_cache_key"] == "durable-cache"
        await original.send_warmup("resp-warmup")
        first = await original.next_request()
        assert first["previous_response_id"] == "resp-warmup"
        await original.send_final("resp-first")
        resumed = await server.accept()
        replay = await resumed.next_request()
        assert "previous_response_id" not in replay
        assert replay["prompt_cache_key"] == THREAD
        assert replay["input"][0]["type"] == "additional_tools" and "id" not in replay["input"][0]
        assert replay["input"][1]["role"] == "developer"
        assert replay["input"][1]["content"][0]["text"] == "durable instructions"
        assert "first prompt" in json.dumps(replay) and "resume prompt" in json.dumps(replay)
        await resumed.send_final("resp-resumed")

    config = durable_config(
        server, workspace=workspace, session_id=THREAD, prompt_cache_key="durable-cache",
        rollout=ta.RolloutConfig(rollout_home),
    )
    async with scripted(script, 15):
        async with ta.open_agent(config) as agent:
            assert agent.rollout is not None
            rollout_path = agent.rollout.path
            first = await (await agent.prompt("first prompt")).result()
            encoded = json.dumps(first.snapshot().to_json())
            await agent.flush_rollout()
            durable = ta.RolloutConfig(rollout_home).load_session(THREAD)
            assert durable.thread_id == agent.session_id
        assert Path(durable.workspace).resolve() == workspace.resolve()
        assert durable.rollout_path == rollout_path.resolve()
        snapshot_json = json.loads(encoded)
        assert snapshot_json["version"] == 1
        prefix = snapshot_json["request_prefix"]
        assert prefix[0]["type"] == "additional_tools" and "id" not in prefix[0]
        assert isinstance(prefix[1]["id"], str)
        assert all(isinstance(item.get("id"), str) for item in snapshot_json["history"])
        rollout_history = [
            line["payload"]
            for line in map(json.loads, rollout_path.read_text().splitlines())
            if line["type"] == "response_item"
        ]
        assert durable.snapshot.to_json()["history"] == rollout_history
        assert snapshot_json["history"] == rollout_history

        snapshot = ta.SessionSnapshot.from_json(encoded)
        unsupported = ta.SessionSnapshot.from_json({**json.loads(encoded), "version": 2})
        with pytest.raises(ta.InvalidSessionSnapshot, match="unsupported format version"):
            durable_config(server, resume=unsupported)
        with pytest.raises(ta.InvalidSessionSnapshot, match="instructions or tool definitions"):
            durable_config(server, instructions="changed instructions", resume=snapshot)
        other = workspace.parent / "other-workspace"
        other.mkdir()
        with pytest.raises(ta.WorkspaceChanged):
            durable_config(server, workspace=other, resume=snapshot)
        with pytest.raises(ta.InvalidSessionSnapshot, match="prompt cache key"):
            durable_config(server, prompt_cache_key="changed-cache", resume=snapshot)

        thread_id, durable_snapshot, rollout = durable.into_parts()
        resumed_config = durable_config(server, session_id=thread_id, resume=durable_snapshot, rollout=rollout)
        async with ta.open_agent(resumed_config) as resumed:
            assert resumed.events.request_id == THREAD
            assert (await (await resumed.prompt("resume prompt")).result()).final_message == "done"
            await resumed.flush_rollout()
            assert resumed.rollout is not None and resumed.rollout.path.resolve() == rollout_path.resolve()
    durable = ta.RolloutConfig(rollout_home).load_session(THREAD)
    assert "resume prompt" in json.dumps(durable.snapshot.to_json()["history"])
    lines = [json.loads(line) for line in rollout_path.read_text().splitlines()]
    assert sum(line["type"] == "session_meta" for line in lines) == 1


async def test_serialized_session_resumes_over_ephemeral_https(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        first = await server.accept_http()
        assert first.body["store"] is False and "previous_response_id" not in first.body
        assert "first prompt" in json.dumps(first.body)
        await first.send_final("resp-first")
        resumed = await server.accept_http()
        assert resumed.body["store"] is False and "previous_response_id" not in resumed.body
        replay = json.dumps(resumed.body)
        assert "first prompt" in replay and "done" in replay and "resume prompt" in replay
        tail = resumed.body["input"][-3:]
        assert [(item["role"], item["content"][0]["text"]) for item in tail] == [
            ("user", "first prompt"), ("assistant", "done"), ("user", "resume prompt")
        ]
        await resumed.send_final("resp-resumed")

    def ephemeral_https() -> ta.Responses:
        # As the seed builds it: HTTPS and store: false, no history policy (derived: SPEC sec. 6).
        return ta.Responses(profile=ta.Profile.OPENAI,
                            transport=ta.Transport.HTTPS, store=False, api_base_url=server.http_base_url)

    config = ta.AgentConfig(
        auth="test-key", instructions="durable instructions", thinking=ta.Thinking.LOW, workspace=workspace,
        responses=ephemeral_https(), prompt_cache_key="durable-cache",
    )
    async with scripted(script):
        async with ta.open_agent(config) as agent:
            first = await (await agent.prompt("first prompt")).result()
        snapshot = ta.SessionSnapshot.from_json(json.dumps(first.snapshot().to_json()))
        # The seed's resumed builder: no workspace, session id or cache key of its own.
        resumed_config = ta.AgentConfig(
            auth="test-key", instructions="durable instructions", thinking=ta.Thinking.LOW,
            responses=ephemeral_https(), resume=snapshot,
        )
        async with ta.open_agent(resumed_config) as resumed:
            assert (await (await resumed.prompt("resume prompt")).result()).final_message == "done"


async def test_a_resumed_websocket_session_replays_in_full_without_warmup(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-1")
        resumed = await server.accept()
        replay = await resumed.next_request()
        assert "generate" not in replay and "previous_response_id" not in replay
        assert [i.get("role") for i in replay["input"][1:]] == ["developer", "developer", "user", "user",
                                                                 "assistant", "user"]
        await resumed.send_final("resp-2")
        follow = await resumed.next_request()
        assert follow["previous_response_id"] == "resp-2" and len(follow["input"]) == 1
        await resumed.send_final("resp-3")

    log = EventLog()
    config = durable_config(server, workspace=workspace)
    async with scripted(script) as nursery:
        async with ta.open_agent(config) as agent:
            snapshot = (await (await agent.prompt("one")).result()).snapshot()
        async with ta.open_agent(durable_config(server, resume=snapshot)) as resumed:
            nursery.start_soon(log.consume, resumed.events)
            await (await resumed.prompt("two")).result()
            await (await resumed.prompt("three")).result()
    assert "model.warmup.started" not in log.kinds()


def test_snapshot_golden_fixture_keeps_loading() -> None:
    golden = Path(__file__).parent.parent / "fixtures" / "session_snapshot_v1.json"
    snapshot = ta.SessionSnapshot.from_json(golden.read_text())
    assert snapshot.version == 1
    assert snapshot.prompt_cache_key == "golden-cache"
    assert [item["type"] for item in snapshot.history] == ["message", "message", "message", "message"]
    assert json.loads(golden.read_text()) == snapshot.to_json()


async def _noop(ctx: ta.ToolContext, args: Any) -> str:
    return "unused"


def extra_tools() -> ta.Tools:
    return ta.Tools.default().function("extra", "A tool the session never had.", {"type": "object"}, _noop)


async def test_every_snapshot_incompatibility_is_refused_at_the_config(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """SPEC sec. 8 (config validates on construction, sec. 1): version, instructions or
    tools, prompt cache key and workspace are all refused by ``AgentConfig(resume=...)``,
    before any agent opens."""

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-1")

    async with scripted(script):
        async with ta.open_agent(durable_config(server, workspace=workspace, tools=extra_tools())) as agent:
            snapshot = (await (await agent.prompt("one")).result()).snapshot()
    assert durable_config(server, tools=extra_tools(), resume=snapshot).resume is snapshot  # the same: accepted
    with pytest.raises(ta.InvalidSessionSnapshot, match="unsupported format version"):
        durable_config(server, tools=extra_tools(), resume=attrs.evolve(snapshot, version=2))
    for changed in ({"tools": None}, {"tools": ta.Tools.default()}, {"tools": ta.Tools.empty()},
                    {"tools": extra_tools(), "instructions": "changed instructions"},
                    {"tools": extra_tools(), "instructions": None}):  # the built-in default
        with pytest.raises(ta.InvalidSessionSnapshot, match="instructions or tool definitions"):
            durable_config(server, resume=snapshot, **changed)
    with pytest.raises(ta.InvalidSessionSnapshot, match="prompt cache key"):
        durable_config(server, tools=extra_tools(), prompt_cache_key="changed-cache", resume=snapshot)
    other = workspace.parent / "elsewhere"
    other.mkdir()
    with pytest.raises(ta.WorkspaceChanged):
        durable_config(server, tools=extra_tools(), workspace=other, resume=snapshot)


async def test_a_tools_factory_session_checks_instructions_at_the_config_and_tools_when_opened(
    server: FakeResponsesServer, workspace: Path
) -> None:
    # A tools_factory needs the agent's handle, so its tools exist only once the agent
    # opens; the instructions are still checked by AgentConfig.
    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-1")

    async with scripted(script):
        async with ta.open_agent(durable_config(server, workspace=workspace)) as agent:
            snapshot = (await (await agent.prompt("one")).result()).snapshot()
    with pytest.raises(ta.InvalidSessionSnapshot, match="instructions or tool definitions"):
        durable_config(server, instructions="changed", tools_factory=lambda handle: ta.Tools.default(),
                       resume=snapshot)
    accepted = durable_config(server, tools_factory=lambda handle: extra_tools(), resume=snapshot)
    with pytest.raises(ta.InvalidSessionSnapshot, match="instructions or tool definitions"):
        async with ta.open_agent(accepted):
            pass


@pytest.mark.parametrize("bad", ["not json", "[]", '{"version": 1}', '{"version": 1, "model": 3}'])
def test_malformed_snapshots_are_rejected_clearly(bad: str) -> None:
    with pytest.raises(ta.InvalidSessionSnapshot, match="not a trio_agent session snapshot"):
        ta.SessionSnapshot.from_json(bad)


def test_load_session_of_an_unknown_thread_says_so(tmp_path: Path) -> None:
    with pytest.raises(ta.InvalidSessionSnapshot, match="no rollout for thread"):
        ta.RolloutConfig(tmp_path).load_session("nope")
