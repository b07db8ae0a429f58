"""Hostile cassettes and bad record/replay settings: each is a clear error that says
what is wrong and what to do, never a crash or a hang (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta
from trio_agent.testing import Cassette, CassetteError, ReplayServer

SESSION = {
    "session_id": "s", "model": "gpt-5.5", "thinking": "low", "fast_mode": False, "store": True,
    "history": "incremental", "workspace": "/tmp", "instructions": None, "max_attempts": None,
}


def header(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"format": "trio-agent-cassette", "version": 1, "trio_agent": "0.1.0",
                             "created": "2025-01-01T00:00:00Z", "transports": ["responses_websocket_v2"],
                             "session": SESSION}
    value.update(changes)
    return value


def body(*lines: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"t": 0.0, "kind": "input.prompt", "agent": "/root", "turn": 1, "text": "hi"},
        {"t": 0.1, "kind": "ws.open", "conn": 1, "agent": "/root", "url": "ws://127.0.0.1:1/v1/responses",
         "purpose": "initial", "request_headers": {}, "response_headers": {}},
        {"t": 0.2, "kind": "ws.send", "conn": 1, "text": '{"type":"response.create"}'},
        *lines,
        {"t": 0.3, "kind": "ws.close", "conn": 1, "by": "client", "code": None, "reason": None},
        {"t": 0.4, "kind": "end"},
    ]


def text(first: dict[str, Any], rest: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in [first, *rest])


def load_error(content: str, **kw: Any) -> str:
    with pytest.raises(CassetteError) as info:
        Cassette.loads(content, source="session.jsonl", **kw)
    assert isinstance(info.value, ta.AgentError) and isinstance(info.value, ValueError)
    return str(info.value)


def test_a_well_formed_cassette_loads() -> None:
    cassette = Cassette.loads(text(header(), body()))
    assert [o.kind for o in cassette.observations] == ["input.prompt", "ws.open", "ws.send", "ws.close"]
    assert [o.line for o in cassette.observations] == [2, 3, 4, 5]
    (connection,) = cassette.connections()
    assert connection.websocket and [s.kind for s in connection.steps] == ["ws.send", "ws.close"]
    assert cassette.complete


def test_a_truncated_last_line_says_the_file_was_cut_off() -> None:
    content = text(header(), body())
    message = load_error(content[:-20])
    assert message.startswith("session.jsonl, line 6: the last line is not complete JSON")
    assert "truncated" in message and "record the session again" in message


def test_a_corrupt_line_in_the_middle_names_it() -> None:
    lines = text(header(), body()).splitlines()
    lines[2] = lines[2][:-7]  # a line that lost its end, with whole lines after it
    message = load_error("\n".join(lines) + "\n")
    assert message.startswith("session.jsonl, line 3: not valid JSON")
    assert "corrupt" in message


def test_a_missing_end_line_says_the_recording_stopped_and_how_to_replay_anyway() -> None:
    lines = body()[:-1]
    message = load_error(text(header(), lines))
    assert "no end line: the recording stopped before the agent closed" in message
    assert "allow_incomplete=True" in message
    partial = Cassette.loads(text(header(), lines), allow_incomplete=True)
    assert not partial.complete and len(partial.observations) == 4


@pytest.mark.parametrize("version", [3, 0, "1", None, True])
def test_another_format_version_is_refused_with_advice(version: object) -> None:
    message = load_error(text(header(version=version), body()))
    assert message.startswith(f"session.jsonl, line 1: cassette format version {version!r} is not supported")
    assert "reads versions 1, 2" in message and "'0.1.0'" in message


@pytest.mark.parametrize("content", ["", "\n", '{"type":"session_meta","payload":{}}\n', "[1, 2]\n"])
def test_something_that_is_not_a_cassette_is_refused(content: str) -> None:
    message = load_error(content)
    assert "not a trio_agent cassette" in message or "empty" in message or "expected a JSON object" in message


def test_an_unknown_observation_kind_is_named_with_the_known_ones() -> None:
    lines = body({"t": 0.25, "kind": "ws.frobnicate", "conn": 1})
    message = load_error(text(header(), lines))
    assert message.startswith("session.jsonl, line 5: unknown observation kind 'ws.frobnicate'")
    assert "ws.recv" in message and "upgrade trio_agent" in message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ({"t": 0.25, "kind": "ws.recv", "conn": "1", "text": "{}"},
         'ws.recv: field "conn" is missing or not an integer'),
        ({"t": 0.25, "kind": "ws.recv", "conn": True, "text": "{}"}, 'field "conn" is missing or not an integer'),
        ({"t": 0.25, "kind": "ws.recv", "conn": 1}, 'a frame needs "json" (an object), "text" (a string) or "bytes"'),
        ({"t": 0.25, "kind": "ws.recv", "conn": 1, "json": [1]}, 'a frame needs "json" (an object)'),
        ({"t": 0.25, "kind": "ws.recv", "conn": 1, "json": "{}"}, 'a frame needs "json" (an object)'),
        ({"t": -1, "kind": "ws.recv", "conn": 1, "text": "{}"}, '"t" must be a non-negative number of seconds'),
        ({"t": 0.25, "kind": "ws.recv", "conn": 7, "text": "{}"}, "connection 7 was never opened"),
        ({"t": 0.25, "kind": "sse.event", "conn": 1, "data": "{}"}, "sse.event on connection 1, which is a WebSocket"),
        ({"t": 0.25, "kind": "ws.close", "conn": 1, "by": "nobody", "code": None, "reason": None},
         '"by" must be one of server, client'),
        ({"t": 0.25, "kind": "input.steer", "agent": "/root", "turn": 1, "text": "x"},
         'field "interrupt" is missing or not true/false'),
    ],
)
def test_a_malformed_line_names_the_field(line: dict[str, Any], expected: str) -> None:
    message = load_error(text(header(), body(line)))
    assert message.startswith("session.jsonl, line 5: ")
    assert expected in message


def test_a_frame_after_its_connection_closed_is_refused() -> None:
    lines = body()
    lines.insert(-1, {"t": 0.35, "kind": "ws.recv", "conn": 1, "text": "{}"})
    assert "ws.recv on connection 1 after it closed" in load_error(text(header(), lines))


def test_lines_after_the_end_line_are_refused() -> None:
    content = text(header(), body()) + json.dumps({"t": 1, "kind": "end"}) + "\n"
    assert "a line after the end line" in load_error(content)


def test_a_header_without_its_session_settings_is_refused() -> None:
    session = {k: v for k, v in SESSION.items() if k != "workspace"}
    assert "session.workspace is missing" in load_error(text(header(session=session), body()))


@pytest.mark.parametrize(("changes", "expected"), [
    ({"transports": ["carrier_pigeon"]}, "transports[0] 'carrier_pigeon' is not one of responses_websocket_v2"),
    ({"session": {**SESSION, "thinking": "deep"}}, "session.thinking 'deep' is not one of none, minimal, low"),
    ({"session": {**SESSION, "history": "some"}}, "session.history 'some' is not one of incremental"),
])
def test_unknown_settings_in_the_header_are_refused(changes: dict[str, Any], expected: str) -> None:
    assert expected in load_error(text(header(**changes), body()))


def test_a_missing_cassette_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="no such cassette; check the path"):
        Cassette.load(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("timing", [-1, float("inf"), float("nan"), True])
def test_replay_timing_must_be_a_finite_scale(timing: float) -> None:
    cassette = Cassette.loads(text(header(), body()))
    with pytest.raises(ValueError, match="timing must be a finite number >= 0"):
        ReplayServer(cassette, timing=timing)


def test_record_must_name_a_file_in_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ta.ConfigError, match="is a directory; pass the path of the cassette file"):
        ta.AgentConfig(auth="test-key", workspace=tmp_path, record=tmp_path)
    with pytest.raises(ta.ConfigError, match="does not exist; create it first"):
        ta.AgentConfig(auth="test-key", workspace=tmp_path, record=tmp_path / "no-such-dir" / "c.jsonl")
    assert ta.AgentConfig(auth="test-key", workspace=tmp_path, record=str(tmp_path / "c.jsonl")).record == (
        tmp_path / "c.jsonl")
