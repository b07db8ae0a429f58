"""Format version 2 stores frames and server-sent events as JSON objects, not JSON inside
strings; version-1 cassettes (every frame a string) still load and replay (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._cassette.format import frame_json, frame_text
from trio_agent.testing import Cassette, FakeResponsesServer, ReplayedTurn, replay

from ._session import add_tool, record
from .test_record_replay import TRANSPORTS

DATA = Path(__file__).parent / "data"
FRAMES = ("ws.send", "ws.recv", "sse.event")


@pytest.mark.parametrize("name", ["v1-websocket.jsonl", "v1-https.jsonl"])
async def test_a_version_1_cassette_loads_and_replays(
    name: str, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The files were recorded by trio_agent before issue 29 (frames as strings)."""
    path = DATA / name
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["version"] == 1
    assert all(isinstance(line.get("text", line.get("data")), str) for line in lines if line.get("kind") in FRAMES)
    cassette = Cassette.load(path)
    assert cassette.header.version == 1
    frames_ = [o for o in cassette.observations if o.kind in FRAMES]
    assert frames_ and all(frame_json(o) is not None and frame_text(o) for o in frames_)
    result = await replay(path, workspace=workspace, in_memory=True)
    result.check()
    assert result.turns == (ReplayedTurn(1, "completed", "three files"),)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_new_cassette_stores_frames_as_json_objects(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport
) -> None:
    recording = await record(server, transport, workspace, tmp_path / "session.jsonl")
    lines = [json.loads(line) for line in recording.path.read_text().splitlines()]
    assert lines[0]["version"] == 2
    stored = [line for line in lines if line.get("kind") in FRAMES]
    assert stored
    for line in stored:
        assert isinstance(line["json"], dict) and "text" not in line and "data" not in line, line
    with trio.fail_after(20):
        (await replay(recording.path, workspace=workspace, tools=add_tool())).check()
