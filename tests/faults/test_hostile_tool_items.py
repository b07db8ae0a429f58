"""Model-controlled tool calls as app-server items (issue 22 item 4): whatever arguments
and results a cell's calls carry -- any JSON, in any order, for any tool the mapping
knows -- the mapper raises nothing and every message it makes is one the schema allows."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from trio_agent import AgentEvent, EventKind
from trio_agent._serve._items import ThreadMapper

from ..serve._schema import check

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
TOOLS = st.sampled_from(["exec", "wait", "exec_command", "write_stdin", "apply_patch", "mcp__s__t", "mcp__",
                         "web__run", "view_image", "update_plan", "lookup", "other"])
CALL_IDS = st.sampled_from(["c", "c/code-1", "c/code-2", "c/code-3"])
# Arguments shaped like the real ones, with hostile values inside.
ARGUMENTS = JSON | st.fixed_dictionaries({"cmd": JSON, "session_id": st.integers(0, 3) | JSON, "chars": JSON,
                                          "workdir": JSON, "shell": JSON, "login": JSON, "path": JSON}) | \
    st.fixed_dictionaries({"search_query": st.lists(st.fixed_dictionaries({"q": JSON}), max_size=2) | JSON,
                           "open": JSON, "find": st.lists(st.fixed_dictionaries({"pattern": JSON, "ref_id": JSON}))})
RESULTS = JSON | st.builds(lambda code, session, out: __import__("json").dumps(
    {k: v for k, v in (("exit_code", code), ("session_id", session), ("output", out)) if v is not None}),
    st.none() | st.integers(0, 3), st.none() | st.integers(0, 3), st.none() | st.text(max_size=8)) | \
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["input_text", "input_image"]), "text": JSON,
                                    "image_url": JSON}), max_size=2)


@st.composite
def events(draw: st.DrawFn) -> tuple[EventKind, dict[str, Any]]:
    kind = draw(st.sampled_from([EventKind.TOOL_CALL, EventKind.TOOL_RESULT, EventKind.TOOL_PROGRESS,
                                 EventKind.PLAN_UPDATED, EventKind.MCP_PROGRESS]))
    call_id, tool = draw(CALL_IDS), draw(TOOLS)
    if kind is EventKind.TOOL_CALL:
        payload = {"call_id": call_id, "tool": tool, "arguments": draw(ARGUMENTS), "model_call_index": 1}
        if draw(st.booleans()):
            payload.update(mcp_server=draw(JSON), mcp_tool=draw(JSON))
    elif kind is EventKind.TOOL_RESULT:
        payload = {"call_id": call_id, "tool": tool, "status": draw(st.sampled_from(["completed", "failed",
                                                                                     "cancelled"])),
                   "duration_ns": draw(st.integers(0, 10**9) | JSON), "result": draw(RESULTS)}
    elif kind is EventKind.MCP_PROGRESS:
        payload = {"call_id": call_id, "server": draw(JSON), "tool": draw(JSON), "progress": draw(JSON),
                   "total": draw(JSON), "message": draw(JSON)}
    elif kind is EventKind.TOOL_PROGRESS:
        payload = {"call_id": call_id, "tool": tool, "message": draw(JSON), "stream": draw(st.just("output") | JSON)}
    else:
        payload = {"call_id": call_id, "explanation": draw(JSON), "plan": draw(JSON | st.lists(
            st.fixed_dictionaries({"step": JSON, "status": JSON}), max_size=2))}
    return kind, payload


# Found by a CI run: a failed command whose result holds a content part with "text": null.
@example([(EventKind.TOOL_CALL, {"call_id": "c/code-2", "tool": "exec_command", "arguments": {"cmd": "x"},
                                 "model_call_index": 1}),
          (EventKind.TOOL_RESULT, {"call_id": "c/code-2", "tool": "exec_command", "status": "failed",
                                   "duration_ns": 1, "result": [{"type": "input_text", "text": None,
                                                                 "image_url": None}]})], False)
@given(st.lists(events(), max_size=12), st.booleans())
def test_any_tool_events_make_only_messages_the_schema_allows(sequence: list[tuple[EventKind, Any]],
                                                              cancelled: bool) -> None:
    ids, clock = itertools.count(), itertools.count(0, 7)
    mapper = ThreadMapper("t", cwd="/w", model_context_window=10, dynamic_tools=frozenset({"lookup"}),
                          new_id=lambda: f"id-{next(ids)}", now_ms=lambda: next(clock), shell="/bin/sh")
    tail = [(EventKind.RUN_FAILED if cancelled else EventKind.RUN_COMPLETED,
             {"status": "cancelled" if cancelled else "completed"})]
    for kind, payload in [(EventKind.RUN_STARTED, {}), *sequence, *tail]:
        for out in mapper.on_event(AgentEvent(kind, payload, 0, "t", 1, 0.0)):
            check("#/definitions/ServerNotification", {"method": out.method, "params": out.params}, out.method)
