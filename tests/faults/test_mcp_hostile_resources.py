"""What an MCP server (or the model's script) can send the resource, prompt, progress
and log paths (issue 28 item 1): whatever the values, the agent gets a bounded,
well-formed event or result, or a failed call (``NestedToolError``) -- never another
exception; a flood of notifications costs a bounded number of events."""

from __future__ import annotations

import json
import math
from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from mcp_types import LoggingMessageNotificationParams

from trio_agent import EventKind
from trio_agent._event_payloads._check import payload_problems
from trio_agent._tools._mcp_config import McpServer
from trio_agent._tools._mcp_notify import BURST, RATE, log_callback, progress_callback
from trio_agent._tools._mcp_resources import (
    MAX_READ_CHARS,
    RESOURCE_TOOLS,
    _bounded_contents,
    _bounded_messages,
    run_resource_tool,
)
from trio_agent._tools._tool_errors import NestedToolError

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
NUMBERS = st.floats() | st.integers() | st.booleans() | st.none() | st.text(max_size=3)
BIG = st.sampled_from(["x" * (MAX_READ_CHARS + 5), "y" * 100, ""])
CONTENT = st.fixed_dictionaries({}, optional={"uri": JSON, "text": BIG | JSON, "blob": BIG | JSON,
                                              "mimeType": JSON, "type": st.sampled_from(["text", "resource"]) | JSON,
                                              "resource": JSON})


def _run(afn: Any, *args: Any) -> Any:
    return trio.run(afn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


@given(st.lists(CONTENT | JSON, max_size=4) | JSON)
def test_any_contents_of_a_read_are_bounded(contents: Any) -> None:
    bounded = _bounded_contents(contents)
    assert all(isinstance(item, dict) for item in bounded)
    assert sum(len(item["text"]) for item in bounded if isinstance(item.get("text"), str)) <= MAX_READ_CHARS
    json.dumps(bounded)  # still JSON


@given(st.lists(st.fixed_dictionaries({"role": JSON, "content": CONTENT | JSON}) | JSON, max_size=4) | JSON)
def test_any_prompt_messages_are_bounded_or_refused(messages: Any) -> None:
    try:
        bounded = _bounded_messages(messages)
    except NestedToolError:
        return
    assert all(isinstance(item, dict) for item in bounded)
    assert len(json.dumps(bounded)) <= MAX_READ_CHARS * 2


@given(st.lists(st.tuples(NUMBERS, NUMBERS, st.text(max_size=5) | st.just("m" * 5000) | st.none()), max_size=30))
def test_any_progress_is_a_well_formed_event_and_a_flood_is_bounded(notes: list[tuple[Any, Any, Any]]) -> None:
    emitted: list[dict[str, Any]] = []

    async def main() -> None:
        report = progress_callback("s", "t", emitted.append)
        for progress, total, message in notes:
            await report(progress, total, message)

    _run(main)
    assert len(emitted) <= BURST  # all at one instant: the burst, no more
    for payload in emitted:
        assert payload_problems(EventKind.MCP_PROGRESS, {"call_id": "c/code-1", **payload}) == []
        assert math.isfinite(payload["progress"]) and len(payload.get("message", "")) <= 1000
    total_seen = len(emitted) + sum(p.get("dropped", 0) for p in emitted)
    assert total_seen <= len(notes)


LEVELS = st.sampled_from(["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"])


@given(st.lists(st.tuples(LEVELS, JSON | st.just("z" * 9000), st.none() | st.text(max_size=300)), max_size=30))
def test_any_log_message_is_a_well_formed_event_and_a_flood_is_bounded(logs: list[tuple[str, Any, Any]]) -> None:
    emitted: list[tuple[EventKind, dict[str, Any]]] = []

    async def main() -> None:
        report = log_callback("s", lambda kind, payload, turn: emitted.append((kind, payload)))
        for level, data, logger in logs:
            await report(LoggingMessageNotificationParams(level=level, data=data, logger=logger))  # type: ignore[arg-type]
            await trio.sleep(0.01)  # 100 a second, against a rate of RATE

    _run(main)
    assert len(emitted) <= BURST + math.ceil(len(logs) * 0.01 * RATE) + 1
    for kind, payload in emitted:
        assert kind is EventKind.MCP_LOG
        assert payload_problems(kind, payload) == []
        assert len(json.dumps(payload["data"])) <= 4000 + 2


class _Down:
    """A server view whose server failed: no tool may reach a request."""

    name = "s"
    state = "failed"
    error = "MCP server s failed: it is down"
    client = None
    settled = trio.Event()
    config = McpServer.stdio("true")


@given(st.sampled_from(sorted(RESOURCE_TOOLS)) | st.text(max_size=10), JSON)
def test_any_arguments_of_the_resource_tools_fail_cleanly(name: str, arguments: Any) -> None:
    async def main() -> None:
        try:
            value = await run_resource_tool(name, arguments, {"s": _Down()})
        except NestedToolError:
            return
        # Only a listing of every server answers: with the failed one named.
        assert value["failed_servers"] == {"s": _Down.error} and value.keys() & {"resources", "resourceTemplates",
                                                                                  "prompts"}
        json.dumps(value)

    _run(main)
