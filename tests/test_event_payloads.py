"""The payload declarations: one per kind, the narrowing overloads, the generated
reference, and the runtime shape check that tests/conftest.py runs on every event."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any, is_typeddict

import pytest
import trio

import trio_agent as ta
from trio_agent._event_payloads import _access, _doc
from trio_agent._event_payloads._check import check_declarations, payload_problems
from trio_agent._events import EventSink
from trio_agent._runtime._model._call_events import stream_event
from trio_agent._wire.stream import AssistantMessageDone, ReasoningDelta, TextDelta

DOCS = Path(__file__).resolve().parent.parent / "docs" / "events.md"


def _camel(kind: ta.EventKind) -> str:
    return "".join(part.capitalize() for part in kind.value.split(".")) + "Payload"


def test_every_kind_declares_a_payload_named_after_it() -> None:
    assert list(ta.EVENT_PAYLOADS) == list(ta.EventKind)
    for kind, declared in ta.EVENT_PAYLOADS.items():
        assert is_typeddict(declared), kind
        assert declared.__name__ == _camel(kind)
        assert getattr(ta, declared.__name__) is declared


def test_every_exported_payload_class_belongs_to_a_kind() -> None:
    exported = {name for name in ta.__all__ if name.endswith("Payload") and name != "EventPayload"}
    assert exported == {declared.__name__ for declared in ta.EVENT_PAYLOADS.values()}
    assert set(ta.EventPayload.__args__) == set(ta.EVENT_PAYLOADS.values())


def test_the_declarations_use_only_what_the_shape_check_reads() -> None:
    check_declarations()


def test_payload_of_has_one_overload_per_kind_returning_its_declaration() -> None:
    overloads: dict[str, str] = {}
    for node in ast.parse(inspect.getsource(_access)).body:
        if isinstance(node, ast.FunctionDef) and node.name == "payload_of" and node.decorator_list:
            kind = ast.unparse(node.args.args[1].annotation or ast.Constant(None))
            overloads[kind] = ast.unparse(node.returns or ast.Constant(None))
    expected = {f"Literal[EventKind.{kind.name}]": f"{d.__name__} | None" for kind, d in ta.EVENT_PAYLOADS.items()}
    assert overloads == {**expected, "EventKind": "EventPayload | None"}


def _event(kind: ta.EventKind, payload: dict[str, Any]) -> ta.AgentEvent:
    return ta.AgentEvent(kind, payload, seq=1, session_id="s")


def test_payload_of_returns_the_events_own_payload_for_its_kind_and_none_otherwise() -> None:
    payload = {"message": "boom"}
    event = _event(ta.EventKind.RUN_ERROR, payload)
    assert ta.payload_of(event, ta.EventKind.RUN_ERROR) is payload
    assert ta.payload_of(event, ta.EventKind.RUN_FAILED) is None
    assert ta.payload_of(event, ta.EventKind("run.error")) is payload


def test_the_reference_is_generated_from_the_declarations() -> None:
    assert DOCS.read_text(encoding="utf-8") == _doc.render(), (
        "docs/events.md is stale: run `python -m trio_agent._event_payloads > docs/events.md`"
    )


def test_the_reference_names_every_kind_and_field() -> None:
    text = _doc.render()
    for kind, declared in ta.EVENT_PAYLOADS.items():
        assert f"## `{kind}`" in text
        section = text.split(f"## `{kind}`", 1)[1].split("\n## ", 1)[0]
        for field in declared.__annotations__:
            assert f"| `{field}` |" in section, (kind, field)


def test_a_field_without_a_docstring_is_refused() -> None:
    node = ast.parse("class Shown(TypedDict):\n    documented: int\n    '''Yes.'''\n    bare: str\n").body[0]
    assert isinstance(node, ast.ClassDef)
    with pytest.raises(ValueError, match=r"Shown\.bare has no docstring"):
        _doc._class(node)


# -- the shape check itself -------------------------------------------------------------

RESULT: dict[str, Any] = {
    "call_id": "call-1/code-1", "tool": "exec_command", "status": "completed", "duration_ns": 5,
    "started_after_ns": 1, "result": [{"type": "input_text", "text": "hi"}],
}


def test_a_conforming_payload_has_no_problems() -> None:
    assert payload_problems(ta.EventKind.TOOL_RESULT, RESULT) == []
    assert payload_problems(ta.EventKind.TOOL_RESULT, {**RESULT, "result": "text", "background": True}) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"status": "done"}, "field 'status': 'done' is not Literal['completed', 'failed', 'cancelled']"),
        ({"duration_ns": True}, "field 'duration_ns': True is not int"),
        ({"duration_ns": 1.5}, "field 'duration_ns': 1.5 is not int"),
        ({"background": False}, "field 'background': False is not Literal[True]"),
        ({"result": 5}, "field 'result': 5 is not str | list[JsonValue]"),
        ({"result": [{"bytes": b"x"}]}, "field \"result[0]['bytes']\": b'x' is not JSON"),
        ({"result": [{1: "x"}]}, "field 'result[0]': the key 1 is not a string"),
        ({"extra": 1}, "undeclared field 'extra' = 1"),
        ({"call_id": None}, "field 'call_id': None is not str"),
    ],
)
def test_each_departure_names_the_kind_the_field_and_the_value(change: dict[str, Any], problem: str) -> None:
    assert payload_problems(ta.EventKind.TOOL_RESULT, {**RESULT, **change}) == [f"tool.result: {problem}"]


def test_missing_fields_and_nested_shapes_are_checked() -> None:
    payload = {k: v for k, v in RESULT.items() if k != "tool"}
    assert payload_problems(ta.EventKind.TOOL_RESULT, payload) == ["tool.result: missing required field 'tool'"]
    plan = {"call_id": "c", "explanation": None, "plan": [{"step": "a", "status": "pending"}, {"step": "b"}]}
    assert payload_problems(ta.EventKind.PLAN_UPDATED, plan) == [
        "plan.updated: missing required field 'plan[1].status'"
    ]
    usage = {"status": "completed", "usage": "lots"}
    assert "run.completed: field 'usage': 'lots' is not an object (TokenCounts)" in payload_problems(
        ta.EventKind.RUN_COMPLETED, usage
    )
    assert payload_problems(ta.EventKind.RUN_ERROR, ["message"]) == [
        "run.error: ['message'] is not an object (RunErrorPayload)"
    ]


def test_the_stream_builders_emit_what_is_declared() -> None:
    # reasoning.summary.delta is emitted by no test of the suite: its builder is checked here.
    emitted: list[tuple[ta.EventKind, dict[str, Any]]] = []

    def emit(kind: ta.EventKind, payload: dict[str, Any], turn_id: int | None) -> None:
        emitted.append((kind, payload))

    for call_index in (1, None):
        stream_event(emit, ReasoningDelta("thinking"), call_index, 1)
        stream_event(emit, TextDelta("hi", "msg-1", "commentary"), call_index, 1)
        stream_event(emit, AssistantMessageDone("hi", None, None), call_index, 1)
    assert [kind for kind, _ in emitted[:3]] == [
        ta.EventKind.REASONING_SUMMARY_DELTA, ta.EventKind.ASSISTANT_DELTA, ta.EventKind.ASSISTANT_MESSAGE
    ]
    assert [problem for kind, payload in emitted for problem in payload_problems(kind, payload)] == []


async def test_the_suite_wide_audit_records_what_an_agent_emits_wrongly(payload_audit: list[str]) -> None:
    # tests/conftest.py wraps EventSink.emit for every test; here its findings are read
    # (and then cleared, so that this test's teardown does not fail on purpose).
    sink = EventSink("session")
    sink.emit(ta.EventKind.RUN_STEERED, {"steer_index": 1, "instruction_bytes": 3}, 1)
    assert payload_audit == []
    event = sink.emit(ta.EventKind.RUN_STEERED, {"steer_index": "1", "instruction_bytes": 3}, 1)
    assert payload_audit == ["run.steered: field 'steer_index': '1' is not int"]
    assert sink.stream.receive_nowait().seq == 1 and event.seq == 2  # emitted all the same
    payload_audit.clear()
    await trio.lowlevel.checkpoint()
