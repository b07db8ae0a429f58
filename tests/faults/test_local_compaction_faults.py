"""Fault matrix: local compaction (issue 23, item 3), over WebSocket and HTTPS.

The summarization request is server-controlled data like any other: when it fails,
returns no summary, or is cancelled mid-way, the compaction fails (or is cancelled)
with history unchanged and exactly one terminal event, and nothing it returned -- a
tool call included -- is acted on. The choice of local compaction is made once per
agent, whichever way the first compaction ends; a server that offers remote
compaction on one call and not on the next gets remote, then local from then on; an
error that does not say compaction is unsupported is no reason to fall back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeResponsesServer, frames

from ..conftest import EventLog, scripted
from ._peer import TRANSPORTS, Peer

Json = dict[str, Any]


@pytest.fixture(params=TRANSPORTS, ids=["websocket", "https"])
def peer(request: pytest.FixtureRequest, server: FakeResponsesServer) -> Peer:
    return Peer(server, request.param)


def answer(response_id: str, text: str) -> list[Json]:
    message = frames.assistant_message(text, item_id=f"msg-{response_id}", phase="final_answer")
    return [frames.output_item_done(0, message), frames.completed(response_id, [message])]


async def fail(peer: Peer, message: str, *, code: str = "invalid_request_error", status: int = 400) -> None:
    """A failure the agent does not retry: an ``error`` frame, or an HTTP error answer."""
    if peer.websocket:
        await peer.send([frames.error_frame(message, code=code)])
    else:
        assert peer.http is not None
        await peer.http.respond(status, json.dumps({"error": {"message": message, "code": code}}))


async def first_turn_then_declined(peer: Peer) -> Json:
    """The first prompt's answer, then a compaction request answered without a compaction
    item; returns the summarization request that follows."""
    await peer.next_request()
    await peer.send(answer("resp-1", "first answer"))
    assert frames.is_compaction_request(await peer.next_request())
    await peer.send(answer("resp-declined", "what trigger?"))
    summarize = await peer.next_request()
    assert frames.is_summarization_request(summarize)
    return summarize


@asynccontextmanager
async def after_first_turn(
    peer: Peer, workspace: Path, script: Callable[[], Awaitable[None]], log: EventLog, **responses: Any
) -> AsyncIterator[ta.Agent]:
    """An agent (its events recorded into ``log``) whose first prompt has its answer,
    beside ``script``."""
    async with scripted(script, 30) as nursery, ta.open_agent(peer.config(workspace, responses=responses)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("first prompt")).result()
        yield agent


def terminal(log: EventLog, turn_id: int) -> list[str]:
    return [e.kind.value for e in log.events if e.turn_id == turn_id and e.kind.is_terminal]


@pytest.mark.parametrize("failure", ["error", "retries_exhausted"])
async def test_a_failed_summarization_fails_the_compaction_and_keeps_history(
    peer: Peer, workspace: Path, failure: str
) -> None:
    async def script() -> None:
        await first_turn_then_declined(peer)
        if failure == "error":
            await fail(peer, "the summarization went wrong")
        else:  # retryable each time, until the attempts are spent
            for attempt in range(2):
                if attempt:
                    await peer.next_request(new_connection=True)
                await fail(peer, "overloaded", code="server_is_overloaded", status=503)
        after = await peer.next_request()
        assert "what trigger?" not in json.dumps(after)
        assert frames.is_summarization_request(after)  # local stays chosen: no second trigger
        await peer.send(answer("resp-summary", "the summary"))

    log = EventLog()
    async with after_first_turn(peer, workspace, script, log, max_attempts=2) as agent:
        before = agent.statistics().history_items
        failed = await agent.compact()
        with pytest.raises(ta.TurnFailed, match="summarization went wrong" if failure == "error" else "overloaded"):
            await failed.result()
        assert agent.statistics().history_items == before
        await (await agent.compact()).result()  # the next one works, straight to local
    assert terminal(log, failed.turn_id) == ["run.failed"]
    assert len(log.payloads("model.compaction.fallback")) == 1
    assert len(log.payloads("model.compaction.failed")) == 1
    assert [p["mode"] for p in log.payloads("model.compaction.started")] == ["remote", "local"]


@pytest.mark.parametrize("reply", ["empty", "blank_text", "tool_call_only", "reasoning_only"])
async def test_a_summarization_that_returns_no_summary_fails_and_nothing_it_returned_runs(
    peer: Peer, workspace: Path, reply: str
) -> None:
    marker = workspace / "ran"
    outputs: dict[str, list[Json]] = {
        "empty": [],
        "blank_text": [frames.assistant_message("  \n ")],
        "tool_call_only": [frames.custom_tool_call("call-x", "exec",
                                                   f'await tools.exec_command({{cmd: "touch {marker}"}})')],
        "reasoning_only": [{"type": "reasoning", "id": "rs-1", "summary": [{"type": "summary_text", "text": "hm"}]}],
    }

    async def script() -> None:
        await first_turn_then_declined(peer)
        await peer.send([frames.completed("resp-nothing", outputs[reply])])
        after = await peer.next_request()  # history as it was: still chained on the first answer
        assert after["previous_response_id"] == "resp-1" and len(after["input"]) == 1
        await peer.send(answer("resp-2", "second answer"))

    log = EventLog()
    async with after_first_turn(peer, workspace, script, log) as agent:
        before = agent.statistics().history_items
        failed = await agent.compact()
        with pytest.raises(ta.TurnFailed, match="no summary text"):
            await failed.result()
        assert agent.statistics().history_items == before
        assert (await (await agent.prompt("second prompt")).result()).final_message == "second answer"
    assert terminal(log, failed.turn_id) == ["run.failed"]
    assert not log.payloads("tool.call") and not marker.exists()
    (failure,) = log.payloads("model.compaction.failed")
    assert "no summary text" in failure["error"]


async def test_a_summarization_cancelled_mid_way_leaves_history_unchanged(peer: Peer, workspace: Path) -> None:
    asked = trio.Event()

    async def script() -> None:
        await first_turn_then_declined(peer)
        asked.set()
        if peer.websocket:
            with pytest.raises(ClientDisconnected):  # the cancelled turn drops its socket
                await peer.next_request()
        after = await peer.next_request(new_connection=True)
        assert frames.is_summarization_request(after) is False
        assert "first answer" in json.dumps(after)  # a full replay of the history as it was
        assert "what trigger?" not in json.dumps(after)
        await peer.send(answer("resp-2", "second answer"))

    log = EventLog()
    async with after_first_turn(peer, workspace, script, log) as agent:
        before = agent.statistics().history_items
        compaction = await agent.compact()
        await asked.wait()
        await compaction.cancel()
        with pytest.raises(ta.TurnCancelled):
            await compaction.result()
        assert agent.statistics().history_items == before  # no summary, no <turn_aborted>
        assert (await (await agent.prompt("second prompt")).result()).final_message == "second answer"
    assert terminal(log, compaction.turn_id) == ["run.failed"]
    assert not log.payloads("model.compaction.completed")


async def test_remote_compaction_on_one_call_and_not_the_next_falls_back_for_good(
    peer: Peer, workspace: Path
) -> None:
    async def script() -> None:
        await peer.next_request()
        await peer.send(answer("resp-1", "first answer"))
        assert frames.is_compaction_request(await peer.next_request())
        item = frames.compaction_item("opaque-remote")
        await peer.send([frames.output_item_done(0, item), frames.completed("resp-remote", [item])])
        second = await peer.next_request()
        assert [i["type"] for i in second["input"]][-2:] == ["compaction", "message"]
        await peer.send(answer("resp-2", "second answer"))
        assert frames.is_compaction_request(await peer.next_request())  # remote is still the first choice
        await peer.send(answer("resp-declined", "not this time"))
        summarize = await peer.next_request()
        assert frames.is_summarization_request(summarize)
        await peer.send(answer("resp-summary", "the summary"))
        third = await peer.next_request()
        text = json.dumps(third)
        assert "opaque-remote" not in text and "the summary" in text  # the local summary replaced everything
        await peer.send(answer("resp-3", "third answer"))
        assert frames.is_summarization_request(await peer.next_request())  # and local from now on
        await peer.send(answer("resp-summary-2", "the summary again"))

    log = EventLog()
    async with after_first_turn(peer, workspace, script, log) as agent:
        await (await agent.compact()).result()
        await (await agent.prompt("second prompt")).result()
        await (await agent.compact()).result()
        await (await agent.prompt("third prompt")).result()
        await (await agent.compact()).result()
    assert [p["mode"] for p in log.payloads("model.compaction.completed")] == ["remote", "local", "local"]
    (fallback,) = log.payloads("model.compaction.fallback")
    assert (fallback["reason"], fallback["response_id"]) == ("no_compaction_item", "resp-declined")


@pytest.mark.parametrize(("message", "code"), [
    ("You exceeded your current quota", "insufficient_quota"),
    ("no compaction today", "invalid_request_error"),
])
async def test_an_error_that_does_not_say_compaction_is_unsupported_fails_without_falling_back(
    peer: Peer, workspace: Path, message: str, code: str
) -> None:
    async def script() -> None:
        await peer.next_request()
        await peer.send(answer("resp-1", "first answer"))
        assert frames.is_compaction_request(await peer.next_request())
        await fail(peer, message, code=code)
        # Still remote: the next compaction sends the trigger again.
        assert frames.is_compaction_request(await peer.next_request())
        await peer.send([frames.output_item_done(0, frames.compaction_item()),
                         frames.completed("resp-remote", [frames.compaction_item()])])

    log = EventLog()
    async with after_first_turn(peer, workspace, script, log) as agent:
        with pytest.raises(ta.TurnFailed, match=message):
            await (await agent.compact()).result()
        await (await agent.compact()).result()
    assert not log.payloads("model.compaction.fallback")
    assert [p["mode"] for p in log.payloads("model.compaction.completed")] == ["remote"]


async def test_several_compaction_items_are_bad_data_not_a_decline(peer: Peer, workspace: Path) -> None:
    async def script() -> None:
        await peer.next_request()
        await peer.send(answer("resp-1", "first answer"))
        assert frames.is_compaction_request(await peer.next_request())
        items = [frames.compaction_item("a", item_id="cmp-1"), frames.compaction_item("b", item_id="cmp-2")]
        await peer.send([frames.completed("resp-two", items)])

    log = EventLog()
    async with after_first_turn(peer, workspace, script, log) as agent:
        with pytest.raises(ta.TurnFailed, match="returned 2 compaction items; expected exactly one"):
            await (await agent.compact()).result()
    assert not log.payloads("model.compaction.fallback")
