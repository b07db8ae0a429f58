"""The event-to-item mapping alone (pure, synchronous): ``ThreadMapper`` fed AgentEvents."""

from __future__ import annotations

import itertools
import json
from typing import Any

from trio_agent import AgentEvent, EventKind, ThreadStatus
from trio_agent._serve._items import ThreadMapper, UserInput
from trio_agent._serve._outs import DynamicOutcome, Out

from ._schema import check


def mapper(**kw: Any) -> ThreadMapper:
    ids = itertools.count(1)
    clock = itertools.count(1000, 10)
    return ThreadMapper("thread-1", cwd="/work", model_context_window=1000, dynamic_tools=frozenset({"lookup"}),
                        new_id=lambda: f"id-{next(ids)}", now_ms=lambda: next(clock), shell="/bin/bash", **kw)


Json = dict[str, Any]


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


def feed(m: ThreadMapper, calls: list[tuple[EventKind, Json]], turn_id: int = 1) -> list[Out]:
    return [out for kind, payload in calls for out in valid(m.on_event(event(kind, turn_id, **payload)))]


def completed_items(outs: list[Out]) -> dict[str, Json]:
    return {o.params["item"]["id"]: o.params["item"] for o in outs if o.method == "item/completed"}


def shell_result(call_id: str, tool: str, status: str = "completed", **result: Any) -> tuple[EventKind, Json]:
    return (EventKind.TOOL_RESULT, {"call_id": call_id, "tool": tool, "status": status, "duration_ns": 5_000_000,
                                    "result": json.dumps(result)})


def test_a_cell_is_no_item_and_its_command_is_one_that_write_stdin_joins() -> None:
    m = mapper()
    m.on_event(event(EventKind.RUN_STARTED))
    outs = feed(m, [
        (EventKind.TOOL_CALL, {"call_id": "c-1", "tool": "exec", "arguments": "text(1)"}),
        (EventKind.TOOL_CALL, {"call_id": "c-1/code-1", "tool": "exec_command",
                               "arguments": {"cmd": "cat; echo bye", "workdir": "sub"}}),
        (EventKind.TOOL_PROGRESS, {"call_id": "c-1/code-1", "tool": "exec_command", "message": "ready\n",
                                   "stream": "output"}),
        shell_result("c-1/code-1", "exec_command", session_id=4, output="ready\n"),  # still running
        (EventKind.TOOL_CALL, {"call_id": "c-1/code-2", "tool": "write_stdin",
                               "arguments": {"session_id": 4, "chars": "hi\n"}}),
        shell_result("c-1/code-2", "write_stdin", session_id=4, output="hi\n"),
        (EventKind.TOOL_CALL, {"call_id": "c-1/code-3", "tool": "write_stdin", "arguments": {"session_id": 4}}),
        (EventKind.TOOL_RESULT, {"call_id": "c-1/code-3", "tool": "write_stdin", "status": "failed",
                                 "duration_ns": 0, "result": "write_stdin: stdin is closed"}),  # no news
        (EventKind.TOOL_CALL, {"call_id": "c-1/code-4", "tool": "write_stdin", "arguments": {"session_id": 4,
                                                                                         "chars": ""}}),
        shell_result("c-1/code-4", "write_stdin", exit_code=0, output="bye\n"),
        (EventKind.TOOL_RESULT, {"call_id": "c-1", "tool": "exec", "status": "completed", "duration_ns": 0,
                                 "result": [{"type": "input_text", "text": "1"}]}),
    ])
    assert [(o.method, o.params.get("itemId") or o.params.get("item", {}).get("id")) for o in outs] == [
        ("item/started", "c-1/code-1"),
        ("item/commandExecution/outputDelta", "c-1/code-1"),  # streamed while it ran
        ("item/commandExecution/terminalInteraction", "c-1/code-1"),
        ("item/commandExecution/outputDelta", "c-1/code-1"),  # the write's output, not streamed: after its result
        ("item/commandExecution/outputDelta", "c-1/code-1"),
        ("item/completed", "c-1/code-1"),
    ]
    assert outs[2].params == {"threadId": "thread-1", "turnId": m.turns[0].id, "itemId": "c-1/code-1",
                              "processId": "4", "stdin": "hi\n"}
    item = completed_items(outs)["c-1/code-1"]
    assert item["command"] == "/bin/bash -lc 'cat; echo bye'" and item["cwd"] == "/work/sub"
    assert item["commandActions"] == [{"type": "unknown", "command": "cat; echo bye"}]
    assert (item["status"], item["exitCode"], item["processId"]) == ("completed", 0, "4")
    assert item["aggregatedOutput"] == "ready\nhi\nbye\n" == "".join(
        o.params["delta"] for o in outs if o.method == "item/commandExecution/outputDelta")
    assert 0 < item["durationMs"] <= item["completedAtMs"] - item["startedAtMs"]  # from its start to the exit


def test_a_session_left_running_by_an_earlier_turn_is_fed_by_an_item_of_its_own() -> None:
    m = mapper()
    m.on_event(event(EventKind.RUN_STARTED))
    feed(m, [(EventKind.TOOL_CALL, {"call_id": "c-1/code-1", "tool": "exec_command",
                                    "arguments": {"cmd": "sleep 9", "login": False, "shell": "/bin/zsh"}}),
             shell_result("c-1/code-1", "exec_command", session_id=4, output="")])
    outs = valid(m.on_event(event(EventKind.RUN_COMPLETED, status="completed")))
    left = completed_items(outs)["c-1/code-1"]  # closed with the turn, still running
    assert (left["status"], left["processId"], left["aggregatedOutput"]) == ("inProgress", "4", "")
    m.on_event(event(EventKind.RUN_STARTED, 2))
    outs = feed(m, [(EventKind.TOOL_CALL, {"call_id": "c-2/code-1", "tool": "write_stdin",
                                           "arguments": {"session_id": 4, "chars": "x"}}),
                    shell_result("c-2/code-1", "write_stdin", exit_code=1, output="done")], turn_id=2)
    fed = completed_items(outs)["c-2/code-1"]
    assert fed["command"] == "/bin/zsh -c 'sleep 9'" and fed["commandActions"][0]["command"] == "sleep 9"
    assert (fed["source"], fed["processId"], fed["status"], fed["exitCode"]) == (
        "unifiedExecInteraction", "4", "failed", 1)
    outs = feed(m, [(EventKind.TOOL_CALL, {"call_id": "c-2/code-2", "tool": "write_stdin",
                                           "arguments": {"session_id": 9}}),
                    (EventKind.TOOL_RESULT, {"call_id": "c-2/code-2", "tool": "write_stdin", "status": "failed",
                                             "duration_ns": 0, "result": "write_stdin: unknown session_id 9"})],
                turn_id=2)
    unknown = completed_items(outs)["c-2/code-2"]
    assert (unknown["command"], unknown["status"], unknown["aggregatedOutput"]) == (
        "write_stdin", "failed", "write_stdin: unknown session_id 9")


def test_mcp_web_search_image_plan_and_dynamic_calls() -> None:
    outcomes = {"d-1": DynamicOutcome(({"type": "inputText", "text": "ok"},), success=True)}
    m = mapper(outcomes=outcomes.get)
    m.on_event(event(EventKind.RUN_STARTED))
    outs = feed(m, [
        (EventKind.TOOL_CALL, {"call_id": "c/code-1", "tool": "mcp__docs__look_up", "arguments": {"q": 1},
                               "mcp_server": "docs", "mcp_tool": "look-up"}),
        (EventKind.TOOL_RESULT, {"call_id": "c/code-1", "tool": "mcp__docs__look_up", "status": "completed",
                                 "duration_ns": 2_000_000, "result": [
                                     {"type": "input_text", "text": "found"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}),
        (EventKind.TOOL_CALL, {"call_id": "c/code-2", "tool": "mcp__a__b__c", "arguments": {}}),  # not listed
        (EventKind.TOOL_RESULT, {"call_id": "c/code-2", "tool": "mcp__a__b__c", "status": "failed",
                                 "duration_ns": 0, "result": "unknown MCP tool mcp__a__b__c"}),
        (EventKind.TOOL_CALL, {"call_id": "c/code-3", "tool": "web__run",
                               "arguments": {"search_query": [{"q": "trio"}, {"q": "nurseries"}]}}),
        (EventKind.TOOL_RESULT, {"call_id": "c/code-3", "tool": "web__run", "status": "completed",
                                 "duration_ns": 0, "result": "results"}),
        (EventKind.TOOL_CALL, {"call_id": "c/code-4", "tool": "web__run", "arguments": '{"open": [{"ref_id": "u"}]}'}),
        (EventKind.TOOL_CALL, {"call_id": "c/code-5", "tool": "view_image", "arguments": {"path": "a.png"}}),
        (EventKind.PLAN_UPDATED, {"call_id": "c/code-6", "explanation": None, "plan": [
            {"step": "read", "status": "completed"}, {"step": "write", "status": "in_progress"}]}),
        (EventKind.TOOL_CALL, {"call_id": "c/code-6", "tool": "update_plan", "arguments": {}}),  # no item
        (EventKind.TOOL_CALL, {"call_id": "d-1", "tool": "lookup", "arguments": {}}),
        (EventKind.TOOL_RESULT, {"call_id": "d-1", "tool": "lookup", "status": "completed", "duration_ns": 0}),
        (EventKind.TOOL_CALL, {"call_id": "w-1", "tool": "unsupported_thing", "arguments": {}}),
        (EventKind.TOOL_CALL, {"call_id": "c/code-7", "tool": "my_user_tool", "arguments": {}}),
    ])
    done = completed_items(outs)
    assert {k: done["c/code-1"][k] for k in ("server", "tool", "arguments", "status", "error", "durationMs")} == {
        "server": "docs", "tool": "look-up", "arguments": {"q": 1}, "status": "completed", "error": None,
        "durationMs": 2}
    assert done["c/code-1"]["result"] == {"structuredContent": None, "content": [
        {"type": "text", "text": "found"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
    assert (done["c/code-2"]["server"], done["c/code-2"]["tool"], done["c/code-2"]["error"]) == (
        "a", "b__c", {"message": "unknown MCP tool mcp__a__b__c"})
    assert done["c/code-3"]["query"] == "trio" and done["c/code-3"]["action"] == {
        "type": "search", "query": "trio", "queries": ["trio", "nurseries"]}
    (plan,) = [o.params for o in outs if o.method == "turn/plan/updated"]
    assert plan == {"threadId": "thread-1", "turnId": m.turns[0].id, "explanation": None,
                    "plan": [{"step": "read", "status": "completed"}, {"step": "write", "status": "inProgress"}]}
    assert done["d-1"]["contentItems"] == [{"type": "inputText", "text": "ok"}] and done["d-1"]["success"]
    started = {o.params["item"]["id"]: o.params["item"] for o in outs if o.method == "item/started"}
    assert started["c/code-4"]["action"] == {"type": "openPage", "url": "u"}
    assert started["c/code-5"] == {**started["c/code-5"], "type": "imageView", "path": "/work/a.png"}
    assert set(started) == {"c/code-1", "c/code-2", "c/code-3", "c/code-4", "c/code-5", "d-1"}
    outs = valid(m.on_event(event(EventKind.RUN_FAILED, status="cancelled")))  # what is open is closed
    assert sorted(o.params["item"]["id"] for o in outs if o.method == "item/completed") == ["c/code-4", "c/code-5"]
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


def test_an_mcp_servers_progress_is_shown_on_its_call_item() -> None:
    m = mapper()
    m.on_event(event(EventKind.RUN_STARTED))
    progress = {"call_id": "c/code-1", "server": "docs", "tool": "look-up"}
    outs = feed(m, [
        (EventKind.MCP_PROGRESS, {**progress, "progress": 0.0}),  # before its item: nothing to show it on
        (EventKind.TOOL_CALL, {"call_id": "c/code-1", "tool": "mcp__docs__look_up", "arguments": {},
                               "mcp_server": "docs", "mcp_tool": "look-up"}),
        (EventKind.MCP_PROGRESS, {**progress, "progress": 1.0, "total": 3.0, "message": "reading"}),
        (EventKind.MCP_PROGRESS, {**progress, "progress": 2.5}),
        (EventKind.MCP_PROGRESS, {**progress, "progress": 3.0, "total": 3.0, "dropped": 4}),
        (EventKind.TOOL_RESULT, {"call_id": "c/code-1", "tool": "mcp__docs__look_up", "status": "completed",
                                 "duration_ns": 0, "result": []}),
        (EventKind.MCP_PROGRESS, {**progress, "progress": 4.0}),  # after it: nothing either
    ])
    shown = [(o.params["itemId"], o.params["message"]) for o in outs if o.method == "item/mcpToolCall/progress"]
    assert shown == [("c/code-1", "reading (1/3)"), ("c/code-1", "2.5"), ("c/code-1", "3/3")]
