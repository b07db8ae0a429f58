"""``ExecEvents``: app-server v2 notifications to exec JSONL events (pure, table-driven).

Every notification fed in is first checked against the real app-server schema, and
every event that comes out against the exec events the TypeScript SDK types
(``_exec_schema``), so the mapping is tested between the two real contracts.
"""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent.cli._exec._events import ExecEvents, TurnOutcome, exec_item, usage_of

from ..serve._schema import check
from ._exec_schema import check_event

Json = dict[str, Any]
THREAD, TURN = "thr-1", "turn-1"


def note(method: str, **params: Any) -> tuple[str, Json]:
    check("#/definitions/ServerNotification", {"method": method, "params": params}, method)
    return method, params


def turn(status: str = "completed", items: list[Json] | None = None, error: Json | None = None) -> Json:
    return {"id": TURN, "items": items or [], "status": status, "error": error, "startedAt": 1, "completedAt": 2,
            "durationMs": 1}


def command(item_id: str, status: str = "inProgress", output: str | None = None, exit_code: int | None = None,
            ) -> Json:
    return {"type": "commandExecution", "id": item_id, "command": "echo hi", "cwd": "/w", "processId": None,
            "source": "agent", "status": status, "commandActions": [{"type": "unknown", "command": "echo hi"}],
            "aggregatedOutput": output, "exitCode": exit_code, "durationMs": None}


def message(item_id: str, text: str) -> Json:
    return {"type": "agentMessage", "id": item_id, "text": text, "phase": "final_answer"}


def started(item: Json) -> tuple[str, Json]:
    return note("item/started", item=item, threadId=THREAD, turnId=TURN, startedAtMs=1)


def completed(item: Json) -> tuple[str, Json]:
    return note("item/completed", item=item, threadId=THREAD, turnId=TURN, completedAtMs=2)


def usage(inputs: int, outputs: int) -> tuple[str, Json]:
    breakdown = {"totalTokens": inputs + outputs, "inputTokens": inputs, "cachedInputTokens": 3,
                 "cacheWriteInputTokens": 0, "outputTokens": outputs, "reasoningOutputTokens": 1}
    return note("thread/tokenUsage/updated", threadId=THREAD, turnId=TURN,
                tokenUsage={"total": breakdown, "last": breakdown, "modelContextWindow": 1000})


def feed(notifications: list[tuple[str, Json]], mapper: ExecEvents | None = None) -> list[Json]:
    mapper = mapper or ExecEvents(THREAD)
    mapper.turn_id = TURN
    out: list[Json] = []
    for method, params in notifications:
        out += mapper.on_notification(method, params)
    for event in out:
        check_event(event)
    return out


TURN_STARTED = note("turn/started", threadId=THREAD, turn=turn("inProgress"))


def test_a_turn_with_a_command_is_the_transcripts_sequence() -> None:
    """The second turn of ts-sdk_real-codex-0.171.0.jsonl: a command item started and
    completed under one id, the answer as item_1, usage at the end."""
    mapper = ExecEvents(THREAD)
    assert mapper.thread_started() == {"type": "thread.started", "thread_id": THREAD}
    events = feed([
        TURN_STARTED,
        started(command("call-1")),
        note("item/commandExecution/outputDelta", threadId=THREAD, turnId=TURN, itemId="call-1", delta="hi\n"),
        completed(command("call-1", "completed", "hi\n", 0)),
        started(message("msg-1", "")),
        note("item/agentMessage/delta", threadId=THREAD, turnId=TURN, itemId="msg-1", delta="done"),
        completed(message("msg-1", "done")),
        usage(300, 7),
        note("turn/completed", threadId=THREAD, turn=turn()),
    ], mapper)
    assert events == [
        {"type": "turn.started"},
        {"type": "item.started", "item": {"id": "item_0", "type": "command_execution", "command": "echo hi",
                                          "aggregated_output": "", "exit_code": None, "status": "in_progress"}},
        {"type": "item.completed", "item": {"id": "item_0", "type": "command_execution", "command": "echo hi",
                                            "aggregated_output": "hi\n", "exit_code": 0, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "done"}},
        {"type": "turn.completed", "usage": {"input_tokens": 300, "cached_input_tokens": 3,
                                             "cache_write_input_tokens": 0, "output_tokens": 7,
                                             "reasoning_output_tokens": 1}},
    ]
    assert mapper.outcome is TurnOutcome.COMPLETED and mapper.final_message == "done"


def test_usage_is_the_last_thread_total_and_zero_without_any() -> None:
    events = feed([TURN_STARTED, usage(100, 1), usage(200, 2), note("turn/completed", threadId=THREAD, turn=turn())])
    assert events[-1]["usage"]["input_tokens"] == 200 and events[-1]["usage"]["output_tokens"] == 2
    bare = feed([TURN_STARTED, note("turn/completed", threadId=THREAD, turn=turn())])
    assert bare[-1] == {"type": "turn.completed", "usage": usage_of(None)}
    assert set(usage_of(None).values()) == {0}


def test_a_failed_turn_says_why_once_as_error_then_turn_failed() -> None:
    """ts-sdk_real-codex_failed-turn.jsonl: ``error`` then ``turn.failed`` with the same message."""
    error = {"message": "the request is refused", "codexErrorInfo": None, "additionalDetails": None}
    mapper = ExecEvents(THREAD)
    events = feed([TURN_STARTED, note("error", error=error, threadId=THREAD, turnId=TURN, willRetry=False),
                   note("turn/completed", threadId=THREAD, turn=turn("failed", error=error))], mapper)
    assert events[1:] == [{"type": "error", "message": "the request is refused"},
                          {"type": "turn.failed", "error": {"message": "the request is refused"}}]
    assert mapper.outcome is TurnOutcome.FAILED and mapper.final_message is None


@pytest.mark.parametrize(("turn_error", "expected"), [
    ({"message": "boom", "codexErrorInfo": None, "additionalDetails": "try later"}, "boom (try later)"),
    (None, "the last error"),
])
def test_the_failure_message_has_the_details_else_the_last_error(turn_error: Json | None, expected: str) -> None:
    error = {"message": "the last error", "codexErrorInfo": None, "additionalDetails": None}
    events = feed([TURN_STARTED, note("error", error=error, threadId=THREAD, turnId=TURN, willRetry=True),
                   note("turn/completed", threadId=THREAD, turn=turn("failed", error=turn_error))])
    assert events[-1] == {"type": "turn.failed", "error": {"message": expected}}


def test_an_interrupted_turn_ends_the_mapping_without_an_event() -> None:
    mapper = ExecEvents(THREAD)
    events = feed([TURN_STARTED, note("turn/completed", threadId=THREAD, turn=turn("interrupted"))], mapper)
    assert events == [{"type": "turn.started"}] and mapper.outcome is TurnOutcome.INTERRUPTED


def test_other_threads_other_turns_and_anything_after_the_end_are_not_shown() -> None:
    mapper = ExecEvents(THREAD)
    other_turn = note("item/completed", item=message("m", "x"), threadId=THREAD, turnId="turn-0", completedAtMs=1)
    other_thread = note("item/completed", item=message("m", "x"), threadId="thr-2", turnId=TURN, completedAtMs=1)
    assert mapper.on_notification(*completed(message("m", "before the turn id is known"))) == []
    events = feed([TURN_STARTED, other_turn, other_thread, note("turn/completed", threadId=THREAD, turn=turn()),
                   completed(message("m2", "late"))], mapper)
    assert [e["type"] for e in events] == ["turn.started", "turn.completed"]


def test_items_left_open_are_completed_from_the_turn_record() -> None:
    events = feed([TURN_STARTED, started(command("c1")),
                   note("turn/completed", threadId=THREAD, turn=turn(items=[command("c1", "failed", "x", 1)]))])
    assert events[2] == {"type": "item.completed", "item": {"id": "item_0", "type": "command_execution",
                                                            "command": "echo hi", "aggregated_output": "x",
                                                            "exit_code": 1, "status": "failed"}}
    assert events[3]["type"] == "turn.completed"


def test_reasoning_is_shown_once_complete_and_not_at_all_when_empty() -> None:
    empty = {"type": "reasoning", "id": "rs-0", "summary": [""], "content": []}
    full = {"type": "reasoning", "id": "rs-1", "summary": ["first", "second"], "content": []}
    events = feed([TURN_STARTED, started(empty), completed(empty), started(full), completed(full)])
    assert events[1:] == [{"type": "item.completed", "item": {"id": "item_0", "type": "reasoning",
                                                              "text": "first\nsecond"}}]


def test_a_file_change_updates_under_its_id_and_fails_when_declined() -> None:
    change = {"path": "/w/a.txt", "kind": {"type": "update", "move_path": None}, "diff": "@@\n-a\n+b\n"}
    added = {"path": "/w/b.txt", "kind": {"type": "add"}, "diff": "b\n"}
    item = {"type": "fileChange", "id": "p1", "changes": [change], "status": "inProgress"}
    events = feed([TURN_STARTED, started(item),
                   note("item/fileChange/patchUpdated", threadId=THREAD, turnId=TURN, itemId="p1",
                        changes=[change, added]),
                   completed({**item, "changes": [change, added], "status": "declined"})])
    assert [(e["type"], e["item"]["id"]) for e in events[1:]] == [
        ("item.started", "item_0"), ("item.updated", "item_0"), ("item.completed", "item_0")]
    assert events[2]["item"]["changes"] == [{"path": "/w/a.txt", "kind": "update"}, {"path": "/w/b.txt", "kind": "add"}]
    assert events[3]["item"]["status"] == "failed"


def test_a_plan_is_one_todo_list_started_updated_and_completed_with_the_turn() -> None:
    def plan(*steps: tuple[str, str]) -> tuple[str, Json]:
        return note("turn/plan/updated", threadId=THREAD, turnId=TURN, explanation=None,
                    plan=[{"step": step, "status": status} for step, status in steps])

    events = feed([TURN_STARTED, plan(("read", "inProgress"), ("fix", "pending")),
                   plan(("read", "completed"), ("fix", "inProgress")),
                   note("turn/completed", threadId=THREAD, turn=turn())])
    todo = [(e["type"], e["item"]["id"], [i["completed"] for i in e["item"]["items"]]) for e in events[1:-1]]
    assert todo == [("item.started", "item_0", [False, False]), ("item.updated", "item_0", [True, False]),
                    ("item.completed", "item_0", [True, False])]
    assert events[1]["item"]["items"][0] == {"text": "read", "completed": False}


def test_mcp_calls_and_web_searches_keep_their_fields() -> None:
    call = {"type": "mcpToolCall", "id": "m1", "server": "docs", "tool": "search", "arguments": {"q": 1},
            "status": "completed", "error": None, "durationMs": 3,
            "result": {"content": [{"type": "text", "text": "r"}], "structuredContent": {"n": 1}}}
    failed = {**call, "id": "m2", "status": "failed", "result": None, "error": {"message": "nope"}}
    search = {"type": "webSearch", "id": "ws1", "query": "trio", "action": {"type": "search", "query": "trio"}}
    events = feed([TURN_STARTED, completed(call), completed(failed), completed(search)])
    assert events[1]["item"] == {"id": "item_0", "type": "mcp_tool_call", "server": "docs", "tool": "search",
                                 "arguments": {"q": 1}, "status": "completed", "error": None,
                                 "result": {"content": [{"type": "text", "text": "r"}],
                                            "structured_content": {"n": 1}}}
    assert events[2]["item"]["error"] == {"message": "nope"} and events[2]["item"]["result"] is None
    assert events[3]["item"] == {"id": "item_2", "type": "web_search", "query": "trio",
                                 "action": {"type": "search", "query": "trio"}}


def test_warnings_and_reroutes_are_error_items() -> None:
    events = feed([
        TURN_STARTED,
        note("warning", message="the sandbox is off", threadId=None),
        note("configWarning", summary="unknown key", details="model_verbosity"),
        note("deprecationNotice", summary="old flag", details=None),
        note("model/rerouted", threadId=THREAD, turnId=TURN, fromModel="a", toModel="b",
             reason="highRiskCyberActivity"),
        note("warning", message="another thread's", threadId="thr-2"),
    ])
    assert [e["item"]["message"] for e in events[1:]] == [
        "the sandbox is off", "unknown key (model_verbosity)", "old flag",
        "model rerouted: a -> b (highRiskCyberActivity)"]
    assert [e["item"]["id"] for e in events[1:]] == ["item_0", "item_1", "item_2", "item_3"]


@pytest.mark.parametrize("item", [
    {"type": "userMessage", "id": "u", "content": []},
    {"type": "contextCompaction", "id": "c"},
    {"type": "dynamicToolCall", "id": "d", "tool": "t", "arguments": {}, "status": "completed"},
    "not an item",
])
def test_items_the_exec_stream_does_not_show(item: object) -> None:
    assert exec_item(item) is None


def test_command_statuses_map_to_the_exec_names() -> None:
    shown = [exec_item(command("c", status)) for status in ("inProgress", "completed", "failed", "declined")]
    assert [item["status"] for item in shown if item] == ["in_progress", "completed", "failed", "declined"]
