"""Resuming a codex session (issue 24, item 2): a rollout the real codex CLI 0.171 wrote
(``tests/fixtures/codex_native_rollout.jsonl``: one turn with an ``exec_command``
call, in *paginated* mode, its recorded cwd a directory that does not exist here) loads
with ``RolloutConfig.load_file``, resumes with ``DurableSession.resume_config`` -- the
session's own instructions, id, file and a workspace that exists -- and what the agent
appends carries the ordinals that continue the file's sequence (codex refuses a
paginated file whose last line has none). Our own (legacy) rollouts get no ordinals.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta
from trio_agent._rollout import RolloutWriter
from trio_agent._session.history import History
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted

FIXTURE = Path(__file__).parent.parent / "fixtures" / "codex_native_rollout.jsonl"
NATIVE_ID = "01a22bdc-9b35-7942-acd8-1d71d4e426f9"
Json = dict[str, Any]


def install_native(codex_home: Path) -> Path:
    """The native rollout, where codex keeps it in ``codex_home``."""
    folder = codex_home / "sessions" / "2026" / "11" / "30"
    folder.mkdir(parents=True)
    path = folder / f"rollout-2026-11-30T09-50-07-{NATIVE_ID}.jsonl"
    shutil.copyfile(FIXTURE, path)
    return path


def lines(path: Path) -> list[Json]:
    return [json.loads(text) for text in path.read_text().splitlines()]


async def resume_once(server: FakeResponsesServer, durable: ta.DurableSession, workspace: Path,
                      seen: list[Json]) -> None:
    async def script() -> None:
        conn = await server.accept()
        request = await conn.next_request()
        seen.append(request)
        await conn.send_final("resp-resumed", "RESUMED-ANSWER")

    config = durable.resume_config(make_config(server, workspace))
    async with scripted(script, 15), ta.open_agent(config) as agent:
        assert (await (await agent.prompt("NEXT-PROMPT")).result()).final_message == "RESUMED-ANSWER"


async def test_a_codex_session_resumes_with_its_instructions_and_continues_its_ordinals(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = install_native(tmp_path / "codex-home")
    before = lines(path)
    assert before[0]["payload"]["history_mode"] == "paginated" and [line["ordinal"] for line in before] == list(
        range(len(before)))
    assert not Path(before[0]["payload"]["cwd"]).exists()  # the recorded cwd is gone: resume elsewhere
    durable = ta.RolloutConfig.load_file(path, workspace=workspace)
    assert (durable.thread_id, durable.rollout_path, durable.workspace) == (NATIVE_ID, path, str(workspace))
    assert durable.instructions == before[0]["payload"]["base_instructions"]["text"]
    seen: list[Json] = []
    await resume_once(server, durable, workspace, seen)
    (request,) = seen
    assert "previous_response_id" not in request and request["prompt_cache_key"] == NATIVE_ID
    assert request["input"][1]["content"][0]["text"] == durable.instructions  # codex's base prompt, ours now
    replayed = json.dumps(request["input"])
    assert "run echo hello-from-tool" in replayed and replayed.count("NEXT-PROMPT") == 1
    after = lines(path)
    assert after[: len(before)] == before  # codex's lines untouched; ours appended
    appended = after[len(before):]
    assert appended and [line["ordinal"] for line in appended] == list(range(len(before), len(after)))
    assert [line["type"] for line in appended].count("session_meta") == 0
    assert any(line["type"] == "response_item" and "NEXT-PROMPT" in json.dumps(line) for line in appended)
    # The model is told where it now runs (codex's context names the recorded directory), once.
    moved = [line for line in appended if f"<cwd>{workspace}</cwd>" in json.dumps(line)]
    assert len(moved) == 1 and moved[0]["type"] == "response_item" and replayed.count(f"<cwd>{workspace}</cwd>") == 1


async def test_our_own_rollouts_stay_legacy_without_ordinals(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-1", "FIRST")

    config = make_config(server, workspace, session_id=NATIVE_ID, rollout=ta.RolloutConfig(home))
    async with scripted(script, 15), ta.open_agent(config) as agent:
        await (await agent.prompt("FIRST-PROMPT")).result()
    durable = ta.RolloutConfig(home).load_session(NATIVE_ID)
    assert durable.workspace == str(workspace) and durable.instructions is not None
    seen: list[Json] = []
    await resume_once(server, durable, workspace, seen)
    written = lines(durable.rollout_path)
    assert all("ordinal" not in line for line in written) and written[0]["payload"]["history_mode"] == "legacy"
    assert json.dumps(seen[0]["input"]).count("FIRST-PROMPT") == 1


def test_a_failed_write_uses_up_no_ordinal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = install_native(tmp_path / "codex-home")
    count = len(lines(path))
    durable = ta.RolloutConfig.load_file(path)
    writer = RolloutWriter.open(durable.rollout_config, NATIVE_ID, {}, History(durable.snapshot.history))
    try:
        real_write = os.write

        def full(fd: int, data: Any) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "write", full)
        with pytest.raises(ta.RolloutError, match="No space left"):
            writer.event({"type": "note", "text": "lost"})
        monkeypatch.setattr(os, "write", real_write)
        writer.event({"type": "note", "text": "kept"})
    finally:
        writer.close()
    last = lines(path)[-1]
    assert (last["ordinal"], last["payload"]["text"]) == (count, "kept") and len(lines(path)) == count + 1


def test_a_rollout_file_outside_a_home_or_misnamed_is_refused(tmp_path: Path) -> None:
    loose = tmp_path / f"rollout-2026-11-30T09-50-07-{NATIVE_ID}.jsonl"
    shutil.copyfile(FIXTURE, loose)
    with pytest.raises(ta.InvalidSessionSnapshot, match="not inside a rollout home"):
        ta.RolloutConfig.load_file(loose)
    path = install_native(tmp_path / "codex-home")
    renamed = path.with_name("session.jsonl")
    path.rename(renamed)
    with pytest.raises(ta.InvalidSessionSnapshot, match="not named as a rollout file is"):
        ta.RolloutConfig.load_file(renamed)
    other = renamed.with_name("rollout-2026-11-30T09-50-07-0199a000-0000-7000-8000-00000000000f.jsonl")
    renamed.rename(other)
    with pytest.raises(ta.InvalidSessionSnapshot, match="records session"):  # its session_meta.id says otherwise
        ta.RolloutConfig.load_file(other)
