"""Fault matrix: hostile streams around tool calls that start while their response
streams (issue 27 item 1), on both transports over real loopback sockets.

Whatever the server does around a streamed call, the agent survives, every call that
ran is answered exactly once in history (never run twice, never lost), and each turn
has one terminal event:

- a call item that is malformed: a ``name`` that is not a string is answered as a
  failed call (it used to escape the tool routing as a ``TypeError``); one without a
  usable ``call_id`` is discarded with an ``api.warning`` (no output could answer it);
- a duplicate ``call_id`` in one response: the first call runs, the second is discarded;
- a call done and then the response failing (``response.failed``, a dropped socket while
  the call runs): the call's item and real output are kept and go into the retry's
  request once; the call is not run again. Not retried (a quota error): the turn fails
  and history keeps the call paired with its output;
- a ``response.completed`` whose ``output`` lacks a call that was dispatched (it stays,
  answered), or holds one that never came as ``output_item.done`` (it runs after);
- a cancel while a call runs and the stream is still open: the started call is paired
  with an aborted output, the call queued behind it is never run nor kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from .._streaming_model import TRANSPORTS, Model, Tool, calls_and_outputs, output_of, well_formed
from ..conftest import EventLog, scripted

IDS = [t.name.lower() for t in TRANSPORTS]
A = frames.function_call("call-a", "work", "{}")
FINAL = frames.completed("resp-final", [frames.assistant_message("ok")])


async def prompts(model: Model, workspace: Path, tools: ta.Tools, script: Any, log: EventLog, *texts: str,
                  cancel_first: trio.Event | None = None, **responses: Any) -> list[ta.TurnResult | BaseException]:
    """Run one turn per text; each result, or the error it ended with. ``cancel_first``:
    the first turn is cancelled once that event is set."""
    results: list[ta.TurnResult | BaseException] = []
    config = model.config(workspace, tools=tools, **responses)
    async with scripted(script, 20) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        for index, text in enumerate(texts):
            turn = await agent.prompt(text)
            if index == 0 and cancel_first is not None:
                await cancel_first.wait()
                await turn.cancel()
            try:
                results.append(await turn.result())
            except ta.AgentError as exc:
                results.append(exc)
    return results


def terminals(log: EventLog) -> list[str]:
    return [str(e.payload["status"]) for e in log.events if e.kind.is_terminal]


def history(result: ta.TurnResult | BaseException) -> list[dict[str, Any]]:
    assert isinstance(result, ta.TurnResult), result
    return result.snapshot().history


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_malformed_call_items_are_answered_or_discarded_never_fatal(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    model, tool, log = Model(server, transport), Tool(), EventLog()
    named_badly = {"type": "function_call", "call_id": "call-bad-name", "name": {"not": "a string"}, "arguments": "{}"}
    no_call_id = {"type": "function_call", "name": "work", "arguments": "{}"}
    replays: list[dict[str, Any]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, named_badly),
                          frames.output_item_done(1, no_call_id), frames.output_item_done(2, A)])
        await model.end([frames.completed("resp-1", [named_badly, no_call_id, A])])
        replays.append(await model.next_request())
        await model.end([FINAL])

    [result] = await prompts(model, workspace, tool.tools(), script, log, "go")

    assert terminals(log) == ["completed"] and tool.calls == ["call-a"]
    items = history(result)
    assert well_formed(items)
    assert calls_and_outputs(items) == [("call", "call-bad-name"), ("call", "call-a"),
                                        ("output", "call-bad-name"), ("output", "call-a")]
    assert output_of(items, "call-bad-name") == ["malformed function_call item: its name must be a string, got dict"]
    bad = [p for p in log.payloads("tool.result") if p["call_id"] == "call-bad-name"]
    assert [(p["status"], p["tool"]) for p in bad] == [("failed", "")]
    warnings = [p for p in log.payloads("api.warning") if p["code"] == "discarded_tool_call"]
    assert len(warnings) == 1 and "None" in str(warnings[0]["message"])
    # The server's copy holds the discarded call: the next request replays in full, without it.
    [replay] = replays
    assert "previous_response_id" not in replay
    assert calls_and_outputs(replay["input"]) == calls_and_outputs(items)


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_repeated_call_id_in_one_response_runs_once(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    model, tool, log = Model(server, transport), Tool(), EventLog()
    twin = frames.function_call("call-a", "work", '{"again": true}')

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A),
                          frames.output_item_done(1, twin)])
        await model.end([frames.completed("resp-1", [A, twin])])
        await model.next_request()
        await model.end([FINAL])

    [result] = await prompts(model, workspace, tool.tools(), script, log, "go")
    assert tool.calls == ["call-a"] and terminals(log) == ["completed"]
    assert calls_and_outputs(history(result)) == [("call", "call-a"), ("output", "call-a")]
    assert [p["code"] for p in log.payloads("api.warning")] == ["discarded_tool_call"]


FAILURES = {
    "response_failed": [{"type": "response.failed", "response": {
        "id": "resp-1", "status": "failed", "error": {"code": "server_error", "message": "boom"}}}],
    "error_frame": [frames.error_frame("overloaded", code="server_is_overloaded")],
    "dropped_while_the_call_runs": [],
}


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_call_done_then_the_response_failing_is_kept_and_never_rerun(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, failure: str
) -> None:
    """codex.md 3.4: the items completed in a failed attempt stay in history and its
    in-flight tools are drained first; the retry's request is rebuilt from history."""
    dropped = failure == "dropped_while_the_call_runs"
    model, tool, log = Model(server, transport), Tool(held=dropped), EventLog()
    note = frames.assistant_message("calling work", phase="commentary")
    retries: list[dict[str, Any]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, note),
                          frames.output_item_done(1, A)])
        await tool.started.wait()
        if dropped:
            await model.drop()  # while the call runs
            await trio.testing.wait_all_tasks_blocked()
            tool.release.set()
        else:
            await model.end(FAILURES[failure])
        retries.append(await model.next_request())
        await model.end([FINAL])

    [result] = await prompts(model, workspace, tool.tools(), script, log, "go")

    assert tool.calls == ["call-a"] and terminals(log) == ["completed"]
    [retry] = retries
    assert "previous_response_id" not in retry  # rebuilt from history, in full
    assert calls_and_outputs(retry["input"]) == [("call", "call-a"), ("output", "call-a")]
    assert output_of(retry["input"], "call-a") == ["done call-a"]
    assert "calling work" in str(retry["input"])  # the failed attempt's finished items stay
    assert len(log.payloads("model.attempt.retrying")) == 1
    assert calls_and_outputs(history(result)) == [("call", "call-a"), ("output", "call-a")]


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_call_done_then_a_failure_not_retried_fails_the_turn_with_the_call_answered(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    model, tool, log = Model(server, transport), Tool(), EventLog()
    later: list[dict[str, Any]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await tool.started.wait()
        await model.end([frames.error_frame("quota", code="insufficient_quota")])
        later.append(await model.next_request())
        await model.end([FINAL])

    failed, _ = await prompts(model, workspace, tool.tools(), script, log, "go", "again")

    assert isinstance(failed, ta.TurnFailed) and isinstance(failed.responses_error, ta.UsageLimitExceeded)
    assert tool.calls == ["call-a"] and terminals(log) == ["failed", "completed"]
    assert not log.payloads("model.attempt.retrying")
    # The next turn's request carries the call and its real output, once (after them: its prompt).
    [next_request] = later
    assert calls_and_outputs(next_request["input"]) == [("call", "call-a"), ("output", "call-a")]
    assert output_of(next_request["input"], "call-a") == ["done call-a"]


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_completed_output_that_disagrees_with_the_stream_loses_no_call(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    """``output`` lacks the dispatched A (it ran: it stays, answered) and holds B, which
    never came as ``output_item.done`` (it runs once the response has ended)."""
    model, tool, log = Model(server, transport), Tool(), EventLog()
    only_listed = frames.function_call("call-b", "work", "{}")
    replays: list[dict[str, Any]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await model.end([frames.completed("resp-1", [only_listed])])
        replays.append(await model.next_request())
        await model.end([FINAL])

    [result] = await prompts(model, workspace, tool.tools(), script, log, "go")

    assert tool.calls == ["call-a", "call-b"] and terminals(log) == ["completed"]
    items = history(result)
    assert well_formed(items) and {c for _, c in calls_and_outputs(items)} == {"call-a", "call-b"}
    [replay] = replays
    assert "previous_response_id" not in replay  # the server's copy lacks A: replayed in full
    assert calls_and_outputs(replay["input"]) == calls_and_outputs(items)


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_cancel_while_a_call_runs_and_the_stream_is_open(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    model, tool, log = Model(server, transport), Tool(held=True), EventLog()
    queued = frames.function_call("call-queued", "work", "{}")
    after: list[dict[str, Any]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A),
                          frames.output_item_done(1, queued)])  # the response stays open
        after.append(await model.next_request())
        await model.end([FINAL])

    cancel = trio.Event()

    async def cancel_once_started() -> None:
        await tool.started.wait()
        await log.wait_for(lambda e: e.kind is ta.EventKind.API_EVENT and "call-queued" in str(e.payload))
        cancel.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_once_started)
        cancelled, _ = await prompts(model, workspace, tool.tools(), script, log, "go", "again", cancel_first=cancel)

    assert isinstance(cancelled, ta.TurnCancelled) and terminals(log) == ["cancelled", "completed"]
    assert tool.calls == ["call-a"] and tool.finished == []  # the queued call never ran
    assert [p["call_id"] for p in log.payloads("tool.call")] == ["call-a"]
    assert [(p["call_id"], p["status"]) for p in log.payloads("tool.result")] == [("call-a", "cancelled")]
    [request] = after
    items = request["input"]
    assert calls_and_outputs(items) == [("call", "call-a"), ("output", "call-a")]
    assert "aborted" in output_of(items, "call-a")[0]
    assert "<turn_aborted>" in str(items) and "call-queued" not in str(items)
