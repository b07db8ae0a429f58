"""Rollouts the real Codex CLI resumes unmodified (issue 12, item 1).

Golden comparison with ``tests/fixtures/codex_rollout_recommended.jsonl`` -- the
hand-written rollout that codex-cli 0.171 resumes and lists with its earlier turn
(``/work/shared/reference/codex-rollout/``): every field that file's lines carry, a
rollout written by trio_agent carries too, with the same types; and a file codex has
appended a turn to (``tests/fixtures/codex_appended_turn.jsonl``: the lines codex
0.171 wrote when resuming a native session) still loads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm

FIXTURES = Path(__file__).parent.parent / "fixtures"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(text) for text in path.read_text().splitlines()]


def golden() -> list[dict[str, Any]]:
    return lines(FIXTURES / "codex_rollout_recommended.jsonl")


def golden_event(kind: str) -> dict[str, Any]:
    return next(line["payload"] for line in golden() if line["type"] == "event_msg" and line["payload"]["type"] == kind)


def same_shape(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Every key of ``theirs`` is in ``ours`` with a value of the same JSON type
    (``null`` in either matches anything: the example leaves optional values empty)."""
    for key, value in theirs.items():
        assert key in ours, f"missing {key!r} (codex's example has it)"
        if value is not None and ours[key] is not None:
            assert type(ours[key]) is type(value) or {type(ours[key]), type(value)} <= {int, float}, key


async def run_one_turn(server: FakeResponsesServer, workspace: Path, home: Path, **rollout: Any) -> Path:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call_exec_1", "exec", 'text("a.txt")')
        await conn.next_request()
        await conn.send_final("resp-2", "There is one file, a.txt.")

    session = "0199a000-0000-7000-8000-000000000002"
    config = make_config(server, workspace, session_id=session, prompt_cache_key="model-test",
                         rollout=ta.RolloutConfig(home, **rollout))
    async with scripted(script), ta.open_agent(config) as agent:
        await (await agent.prompt("List the files.")).result()
        assert agent.rollout is not None
        return agent.rollout.path


async def test_a_rollout_has_every_field_codex_needs_to_resume_and_show_it(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = await run_one_turn(server, workspace, tmp_path / "codex-home")
    ours = lines(path)
    assert all(isinstance(line["timestamp"], str) and line["timestamp"].endswith("Z") for line in ours)
    meta = ours[0]
    assert meta["type"] == "session_meta"
    theirs = golden()[0]["payload"]
    same_shape(meta["payload"], {k: v for k, v in theirs.items() if k != "model_provider"})
    assert meta["payload"]["id"] == "0199a000-0000-7000-8000-000000000002" and path.name.endswith(
        meta["payload"]["id"] + ".jsonl")
    assert path.relative_to(tmp_path / "codex-home").parts[0] == "sessions"
    assert (meta["payload"]["source"], meta["payload"]["history_mode"]) == ("cli", "legacy")
    assert "model_provider" not in meta["payload"]  # codex keeps its configured provider
    assert isinstance(meta["payload"]["base_instructions"]["text"], str)
    events = [line["payload"] for line in ours if line["type"] == "event_msg"]
    assert [e["type"] for e in events] == ["task_started", "user_message", "agent_message", "task_complete"]
    for event in events:
        same_shape(event, golden_event(event["type"]))
    assert events[1]["message"] == "List the files."
    assert events[2]["message"] == events[3]["last_agent_message"] == "There is one file, a.txt."
    assert events[0]["turn_id"] == events[3]["turn_id"]
    items = [line["payload"] for line in ours if line["type"] == "response_item"]
    assert [i["type"] for i in items][-4:] == ["message", "custom_tool_call", "custom_tool_call_output", "message"]
    kinds = {line["type"] for line in ours}
    assert kinds <= {"session_meta", "response_item", "event_msg"}


async def test_the_provider_is_written_only_when_configured(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = await run_one_turn(server, workspace, tmp_path / "home", model_provider="local")
    assert lines(path)[0]["payload"]["model_provider"] == "local"


async def test_a_file_codex_appended_to_still_loads(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    path = await run_one_turn(server, workspace, home)
    before = ta.RolloutConfig(home).load_session("0199a000-0000-7000-8000-000000000002").snapshot.history
    appended = (FIXTURES / "codex_appended_turn.jsonl").read_text()
    with path.open("a") as file:
        file.write(appended)
    history = ta.RolloutConfig(home).load_session("0199a000-0000-7000-8000-000000000002").snapshot.history
    codex_items = [line["payload"] for line in map(json.loads, appended.splitlines())
                   if line["type"] == "response_item"]
    assert history[: len(before)] == before
    assert history[len(before):] == codex_items  # codex's turn, in order; its other lines skipped
    assert any(part.get("text") == "second prompt" for item in codex_items for part in item.get("content") or [])
