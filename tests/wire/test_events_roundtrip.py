"""AgentEvent JSONL envelope round trips; EventKind names (hypothesis)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import AgentEvent, EventKind

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
    st.sampled_from(["line\nbreak", "tab\tand\r\nCRLF", "\u2028\u2029", "é ü 漢字 🎉", "\x00\x1f", '"quoted"\\']),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(st.text(), children, max_size=5)),
    max_leaves=25,
)
payloads = st.dictionaries(st.text(), json_values, max_size=8)


@given(
    kind=st.sampled_from(list(EventKind)),
    payload=payloads,
    seq=st.integers(min_value=1, max_value=2**40),
    session_id=st.text(min_size=1),
    turn_id=st.one_of(st.none(), st.integers(min_value=0, max_value=10**6)),
    time=st.floats(min_value=0, max_value=1e9),
)
def test_to_json_line_round_trip(
    kind: EventKind, payload: dict[str, Any], seq: int, session_id: str, turn_id: int | None, time: float
) -> None:
    event = AgentEvent(kind, payload, seq, session_id, turn_id, time)
    line = event.to_json_line()
    assert line.endswith("\n")
    body = line[:-1]
    assert "\n" not in body
    assert "\r" not in body
    decoded = json.loads(body)
    assert decoded["protocol_version"] == 1
    assert decoded["request_id"] == session_id
    assert decoded["seq"] == seq
    assert decoded["type"] == kind.value
    assert decoded["payload"] == payload
    expected_keys = {"protocol_version", "request_id", "seq", "type", "payload"}
    if turn_id is not None:
        expected_keys.add("turn_id")
        assert decoded["turn_id"] == turn_id
    assert set(decoded) == expected_keys
    assert decoded == event.to_json()


def test_to_json_line_is_compact_and_keeps_unicode() -> None:
    event = AgentEvent(EventKind.ASSISTANT_DELTA, {"text": "é\n🎉"}, 3, "sess", None)
    assert event.to_json_line() == (
        '{"protocol_version":1,"request_id":"sess","seq":3,"type":"assistant.delta","payload":{"text":"é\\n🎉"}}\n'
    )


def test_turn_id_is_included_when_set() -> None:
    event = AgentEvent(EventKind.RUN_STARTED, {}, 1, "s", turn_id=0)
    assert json.loads(event.to_json_line())["turn_id"] == 0


DOTTED = re.compile(r"^[a-z]+(\.[a-z_]+)+$")


def test_event_kind_values_are_dotted_unique_names() -> None:
    values = [kind.value for kind in EventKind]
    assert len(values) == len(set(values))
    for value in values:
        assert DOTTED.match(value), value
    for kind in EventKind:
        assert str(kind) == kind.value
        assert kind == kind.value  # a str enum: the wire name is the value
        assert EventKind(kind.value) is kind


@pytest.mark.parametrize(
    "name",
    [
        "run.started",
        "run.steered",
        "run.completed",
        "run.failed",
        "assistant.delta",
        "assistant.message",
        "tool.call",
        "tool.result",
        "model.warmup.completed",
        "model.warmup.failed",
        "model.attempt.started",
        "model.attempt.retrying",
        "model.connection.failed",
    ],
)
def test_spec_event_names_exist(name: str) -> None:
    assert EventKind(name).value == name


def test_is_terminal_only_for_run_completed_and_failed() -> None:
    terminal = {kind for kind in EventKind if kind.is_terminal}
    assert terminal == {EventKind.RUN_COMPLETED, EventKind.RUN_FAILED}
    assert {kind.value for kind in terminal} == {"run.completed", "run.failed"}
