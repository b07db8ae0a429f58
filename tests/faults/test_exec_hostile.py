"""Hostile data on ``trio-agent exec``'s output side: whatever the server's notifications
carry (a hostile model's text, a damaged thread record replayed into ``turn.items``),
the mapping never raises and every event is one line of valid JSON for the SDK's
line reader (node's readline splits on ``\\n`` and ``\\r``)."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent.cli._exec._events import ExecEvents
from trio_agent.cli._exec._output import JsonlOutput

from ._mutations import JSON_VALUES

METHODS = ["turn/started", "item/started", "item/completed", "item/fileChange/patchUpdated", "turn/plan/updated",
           "error", "model/rerouted", "thread/tokenUsage/updated", "turn/completed", "warning", "configWarning",
           "deprecationNotice"]
ITEM_TYPES = ["agentMessage", "reasoning", "commandExecution", "fileChange", "mcpToolCall", "webSearch",
              "collabAgentToolCall", "userMessage"]
HOSTILE_TEXT = st.text(alphabet=st.sampled_from(["a", "\n", "\r", "\u2028", "\u0085", "\x00", "\ud800", "\udfff",
                                                 "\"", "\\", "é", "\U0001f600"]), max_size=12)
FIELDS = st.dictionaries(st.sampled_from(["text", "summary", "command", "aggregatedOutput", "exitCode", "status",
                                          "changes", "result", "error", "arguments", "agentsStates",
                                          "receiverThreadIds", "query", "action", "kind", "plan", "items"]),
                         JSON_VALUES | HOSTILE_TEXT | st.integers(), min_size=1, max_size=6)


@st.composite
def notifications(draw: st.DrawFn) -> tuple[str, Any]:
    method = draw(st.sampled_from(METHODS))
    item = {"type": draw(st.sampled_from(ITEM_TYPES)), "id": draw(st.text(max_size=3)), **draw(FIELDS)}
    params: dict[str, Any] = {"threadId": "thr", "turnId": "turn", **draw(FIELDS)}
    if draw(st.booleans()):
        params["item"] = item
    if method in ("turn/started", "turn/completed"):
        params["turn"] = {"id": "turn", **draw(FIELDS)}
    return method, draw(st.sampled_from([params, params, draw(JSON_VALUES)]))


def written(events: list[dict[str, Any]]) -> bytes:
    stream = trio.testing.MemorySendStream()

    async def write() -> None:
        await JsonlOutput(stream).write(events)

    trio.run(write)
    return stream.get_data_nowait() if events else b""


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(notifications(), max_size=12))
def test_any_notifications_map_to_events_that_are_one_json_line_each(sequence: list[tuple[str, Any]]) -> None:
    mapper = ExecEvents("thr")
    mapper.turn_id = "turn"
    events: list[dict[str, Any]] = []
    for method, params in sequence:
        events += mapper.on_notification(method, params)
    lines = written(events).decode("utf-8").split("\n")
    assert lines[-1] == ""
    assert [json.loads(line) for line in lines[:-1]] == json.loads(json.dumps(events))
    assert all("\r" not in line for line in lines)


def test_a_hostile_answer_stays_one_valid_line() -> None:
    text = "line\nbreak\r\u2028 lone \ud800 and \udfff, NUL \x00, emoji \U0001f600"
    data = written([{"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": text}}])
    (line,) = data.decode("utf-8").splitlines()  # valid UTF-8, one line
    assert json.loads(line)["item"]["text"] == text
