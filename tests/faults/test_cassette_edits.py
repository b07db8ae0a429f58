"""Hostile cassettes, edited by hand, replayed: a frame that is not JSON, frames
reordered, a request that is not JSON, a truncated file. Each ends as a mismatch or a
clear ``CassetteError`` -- never an exception out of the agent, never a hang (the
replays run in memory under ``MockClock`` with a ``limit``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent.testing import CassetteError, replay

SOURCE = Path(__file__).parent.parent / "replay" / "data" / "v2-websocket.jsonl"
LIMIT = 120.0


def _lines() -> list[dict[str, object]]:
    return [json.loads(line) for line in SOURCE.read_text().splitlines()]


def _write(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _index(lines: list[dict[str, object]], kind: str, needle: str) -> int:
    return next(i for i, line in enumerate(lines) if line.get("kind") == kind and needle in json.dumps(line))


async def test_the_unedited_cassette_replays(workspace: Path, autojump_clock: trio.testing.MockClock) -> None:
    """The control: the edits below are what breaks the replays."""
    (await replay(SOURCE, workspace=workspace, in_memory=True, limit=LIMIT)).check()


async def test_a_served_frame_that_is_not_json_fails_the_turn_not_the_replay(
    workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    lines = _lines()
    delta = _index(lines, "ws.recv", "output_text.delta")
    lines[delta] = {"t": lines[delta]["t"], "kind": "ws.recv", "conn": lines[delta]["conn"], "text": "{not json"}
    result = await replay(_write(tmp_path / "edited.jsonl", lines), workspace=workspace, in_memory=True, limit=LIMIT)
    assert result.mismatch is not None
    assert result.turns[0].status == "failed"  # bad data from the "server": a TurnFailed
    assert "turn 1 ended differently" in result.mismatch.headline


async def test_reordered_frames_are_a_mismatch(
    workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    lines = _lines()
    prompt = _index(lines, "ws.send", "count the files")
    completed = _index(lines, "ws.recv", "response.completed")
    lines.insert(prompt, lines.pop(completed))  # the answer before the question
    result = await replay(_write(tmp_path / "edited.jsonl", lines), workspace=workspace, in_memory=True, limit=LIMIT)
    assert result.mismatch is not None


async def test_a_recorded_request_that_is_not_json_is_a_mismatch_with_a_diff(
    workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    lines = _lines()
    prompt = _index(lines, "ws.send", "count the files")
    lines[prompt] = {"t": lines[prompt]["t"], "kind": "ws.send", "conn": lines[prompt]["conn"], "text": "garbage"}
    result = await replay(_write(tmp_path / "edited.jsonl", lines), workspace=workspace, in_memory=True, limit=LIMIT)
    assert result.mismatch is not None
    assert '-  "frame": "garbage"' in result.mismatch.diff


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_a_cassette_cut_off_is_refused_before_anything_runs(tmp_path: Path, cut: float) -> None:
    data = SOURCE.read_bytes()
    path = tmp_path / "cut.jsonl"
    path.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(CassetteError, match=r"truncated|no end line|not complete JSON"):
        from trio_agent.testing import Cassette

        Cassette.load(path)
