"""The event-to-item mapping alone (pure, synchronous): ``ThreadMapper`` fed AgentEvents."""

from __future__ import annotations

import itertools
import json
from typing import Any

from trio_agent import AgentEvent, EventKind, ThreadStatus
from trio_agent._serve._items import DynamicOutcome, Out, ThreadMapper, UserInput

from ._schema import check


def mapper(**kw: Any) -> ThreadMapper:
    ids = itertools.count(1)
    clock = itertools.count(1000, 10)
    return ThreadMapper("thread-1", cwd="/work", model_context_window=1000, dynamic_tools=frozenset({"lookup"}),
                        new_id=lambda: f"id-{next(ids)}", now_ms=lambda: next(clock), **kw)


def event(kind: EventKind, turn_id: int | None = 1, **payload: Any) -> AgentEvent:
    return AgentEvent(kind, payload, 0, "thread-1", turn_id, 0.0)


def valid(outs: list[Out]) -> list[Out]:
    for out in outs:
        check("#/definitions/ServerNotification", {"method": out.method, "params": out.params}, out.method)
    return outs


def test_a_turn_maps_to_status_turn_items_and_completion() -> None:
    m = mapper()
    m.accept_turn(1, UserInput("hi"))
    outs = valid(m.on_event(event(EventKind.RUN_STARTED)))
    assert [(o.method, o.broadcast) for o in outs] == [
        ("thread/status/changed", True), ("turn/started", False), ("item/started", False), ("item/completed", False)]
    outs = valid(m.on_event(event(EventKind.ASSISTANT_DELTA, item_id="msg-1", text="Hel", phase="final_answer")))
    outs += valid(m.on_event(event(EventKind.ASSISTANT_DELTA, item_id="msg-1", text="lo")))
    outs += valid(m.on_event(event(EventKind.ASSISTANT_MESSAGE, item_id="msg-1", text="Hello")))
    assert [o.method for o in outs] == ["item/started", "item/agentMessage/delta", "item/agentMessage/delta",
                                        "item/completed"]
    outs = valid(m.on_event(event(EventKind.RUN_COMPLETED, status="completed")))
    assert [o.method for o in outs] == ["thread/status/changed", "turn/completed"]
    turn = outs[-1].params["turn"]
    assert turn["status"] == "completed" and [i["text"] for i in turn["items"]] == ["Hello"]
    assert turn["durationMs"] == m.turns[0].completed_at_ms - m.turns[0].started_at_ms  # type: ignore[operator]
    assert m.status is ThreadStatus.IDLE and [i["type"] for i in m.turns[0].items] == ["userMessage", "agentMessage"]


def test_events_outside_a_turn_and_after_it_ended_are_not_shown() -> None:
    m = mapper()
    assert m.on_event(event(EventKind.MODEL_WARMUP_STARTED, None)) == []
    m.on_event(event(EventKind.RUN_STARTED))
    m.on_event(event(EventKind.RUN_COMPLETED, status="completed"))
    background = event(EventKind.TOOL_CALL, None, call_id="c/code-1", tool="exec_command", arguments={"cmd": "ls"})
    assert m.on_event(background) == []
    assert m.on_event(event(EventKind.ASSISTANT_DELTA, item_id="late", text="x")) == []


def test_a_failed_turn_reports_its_error_and_leaves_system_error() -> None:
    m = mapper()
    m.on_event(event(EventKind.RUN_STARTED))
    m.on_event(event(EventKind.RUN_ERROR, message="boom: try again later"))
    outs = valid(m.on_event(event(EventKind.RUN_FAILED, status="failed")))
    assert [o.method for o in outs] == ["error", "thread/status/changed", "turn/completed"]
    assert outs[0].params["error"]["message"] == "boom: try again later" and outs[0].params["willRetry"] is False
    assert outs[1].params["status"] == {"type": "systemError"} and m.status is ThreadStatus.SYSTEM_ERROR
    m.on_event(event(EventKind.RUN_STARTED, 2))
    assert m.status is ThreadStatus.ACTIVE


def test_steers_become_user_messages_when_they_join() -> None:
    m = mapper()
    turn = m.accept_turn(1, UserInput("go"))
    m.on_event(event(EventKind.RUN_STARTED))
    turn.steers.append(UserInput("and this", client_id="c-1"))
    outs = valid(m.on_event(event(EventKind.RUN_STEERED, steer_index=1)))
    assert outs[1].params["item"]["content"][0]["text"] == "and this" and outs[1].params["item"]["clientId"] == "c-1"
    assert m.on_event(event(EventKind.RUN_STEERED, steer_index=2)) == []  # nothing known: nothing shown


def test_commands_and_dynamic_calls() -> None:
    outcomes = {"d-1": DynamicOutcome(({"type": "inputText", "text": "ok"},), success=True)}
    m = mapper(outcomes=outcomes.get)
    m.on_event(event(EventKind.RUN_STARTED))
    calls = [
        (EventKind.TOOL_CALL, {"call_id": "c-1", "tool": "exec", "arguments": "text(1)"}),
        (EventKind.TOOL_CALL, {"call_id": "c-1/code-1", "tool": "exec_command",
                               "arguments": {"cmd": "sleep 9", "workdir": "sub"}}),
        (EventKind.TOOL_RESULT, {"call_id": "c-1/code-1", "tool": "exec_command", "status": "completed",
                                 "duration_ns": 5_000_000, "result": json.dumps({"session_id": 4, "output": "z"})}),
        (EventKind.TOOL_CALL, {"call_id": "c-1/code-2", "tool": "write_stdin", "arguments": {"session_id": 4}}),
        (EventKind.TOOL_RESULT, {"call_id": "c-1/code-2", "tool": "write_stdin", "status": "failed",
                                 "result": "write_stdin: unknown session"}),
        (EventKind.TOOL_CALL, {"call_id": "d-1", "tool": "lookup", "arguments": {}}),
        (EventKind.TOOL_RESULT, {"call_id": "d-1", "tool": "lookup", "status": "completed", "duration_ns": 0}),
        (EventKind.TOOL_CALL, {"call_id": "w-1", "tool": "unsupported_thing", "arguments": {}}),
    ]
    outs = [out for kind, payload in calls for out in valid(m.on_event(event(kind, **payload)))]
    completed = {o.params["item"]["id"]: o.params["item"] for o in outs if o.method == "item/completed"}
    shell = completed["c-1/code-1"]
    assert shell["cwd"] == "/work/sub" and shell["processId"] == "4" and shell["exitCode"] is None
    assert shell["durationMs"] == 5 and shell["status"] == "completed"
    fed = completed["c-1/code-2"]
    assert fed["command"] == "sleep 9" and fed["source"] == "unifiedExecInteraction" and fed["status"] == "failed"
    assert fed["aggregatedOutput"] == "write_stdin: unknown session"
    assert completed["d-1"]["contentItems"] == [{"type": "inputText", "text": "ok"}] and completed["d-1"]["success"]
    assert "w-1" not in json.dumps([o.params for o in outs])
    outs = valid(m.on_event(event(EventKind.RUN_FAILED, status="cancelled")))  # the open exec cell is closed
    assert [o.params["item"]["id"] for o in outs if o.method == "item/completed"] == ["c-1"]
    assert outs[-1].params["turn"]["status"] == "interrupted"


def test_a_message_only_in_response_completed_is_still_shown() -> None:
    m = mapper()
    m.on_event(event(EventKind.RUN_STARTED))
    frame = {"type": "response.completed", "response": {"id": "r", "output": [
        {"type": "message", "role": "assistant", "id": "msg-9", "content": [{"type": "output_text", "text": "Done"}]},
    ]}}
    outs = valid(m.on_event(event(EventKind.API_EVENT, direction="inbound", event=frame)))
    assert [(o.method, o.params["item"]["text"]) for o in outs] == [("item/started", ""), ("item/completed", "Done")]
    assert m.on_event(event(EventKind.API_EVENT, direction="inbound", event=frame)) == []  # shown once
