"""Compaction on a Responses server without remote compaction (issue 23, item 3).

A plain server -- ``FakeResponsesServer`` scripted as one that knows nothing of
``compaction_trigger`` -- either answers the compaction request as an ordinary one (a
message, no compaction item) or rejects the trigger with an error naming it. The agent
then compacts locally, as the Codex CLI does: a summarization request (the conversation,
then the summarization prompt, ``tool_choice: "none"``) whose text answer replaces the
history with the recent user messages, fresh context and the summary as a bridge
message. The fallback is chosen once per agent (``model.compaction.fallback``); later
compactions go straight to local. Each scenario runs over WebSocket and HTTPS.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._session.summary import SUMMARIZATION_PROMPT, SUMMARY_PREFIX
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, scripted
from .test_conformance import TRANSPORTS, Peer

Json = dict[str, Any]
REJECTION = "Invalid value: 'compaction_trigger'. Supported values are: 'message', 'function_call', 'reasoning'."


@pytest.fixture(params=TRANSPORTS, ids=["websocket", "https"])
def peer(request: pytest.FixtureRequest, server: FakeResponsesServer) -> Peer:
    return Peer(server, request.param)


def streamed(response_id: str, text: str, *, usage: int = 12) -> list[Json]:
    """A streamed assistant answer (added, one delta, done), then ``response.completed``."""
    done = frames.assistant_message(text, item_id=f"msg-{response_id}", phase="final_answer")
    return [frames.output_item_added(0, {**done, "status": "in_progress", "content": []}),
            frames.text_delta(0, text), frames.output_item_done(0, done),
            frames.completed(response_id, [done], usage_block=frames.usage(usage))]


def texts(body: Json) -> list[str]:
    """The text of every message of a request's input, in order, but the context
    messages (permissions, environment)."""
    found = ["".join(part.get("text", "") for part in item.get("content", []))
             for item in body["input"] if item.get("type") == "message"]
    return [text for text in found if not text.startswith(("<permissions instructions>", "<environment_context>"))]


def bridge(summary: str) -> str:
    return f"{SUMMARY_PREFIX}\n{summary}"


def assert_summarization_request(body: Json) -> None:
    assert frames.is_summarization_request(body) and not frames.is_compaction_request(body)
    assert body["tool_choice"] == "none"
    assert body["input"][-1] == {"type": "message", "role": "user",
                                 "content": [{"type": "input_text", "text": SUMMARIZATION_PROMPT}]}
    assert "format" not in body["text"]


def turn_kinds(log: EventLog, turn_id: int) -> list[str]:
    return [event.kind.value for event in log.events if event.turn_id == turn_id]


async def decline_with_error(peer: Peer) -> None:
    """Reject the compaction request as a server that does not take the trigger item."""
    if peer.transport is ta.Transport.HTTPS:
        await peer._pending.respond(400, json.dumps({"error": {"message": REJECTION, "code": "invalid_value",
                                                               "param": "input[3].type"}}))
    else:
        await peer.reply([frames.error_frame(REJECTION, code="invalid_value")])


async def test_manual_compaction_falls_back_to_a_local_summary_once_and_replays_it(
    peer: Peer, workspace: Path
) -> None:
    async def script() -> None:
        first = await peer.next_request()
        assert texts(first)[-1] == "first prompt"
        await peer.reply(streamed("resp-1", "first answer"))
        trigger = await peer.next_request()
        assert frames.is_compaction_request(trigger)
        # A server without remote compaction answers the conversation instead.
        await peer.reply(streamed("resp-declined", "I do not know what to do with that."))
        summarize = await peer.next_request()
        assert_summarization_request(summarize)
        # Chained on the last answer, as the trigger was (store: true, so HTTPS chains too).
        assert summarize["previous_response_id"] == trigger["previous_response_id"] == "resp-1"
        assert len(summarize["input"]) == 1
        await peer.reply(streamed("resp-summary-1", "SUMMARY-ONE"))
        second = await peer.next_request()
        assert "previous_response_id" not in second  # the new history, replayed in full
        assert texts(second)[-3:] == ["first prompt", bridge("SUMMARY-ONE"), "second prompt"]
        assert "first answer" not in json.dumps(second) and "do not know" not in json.dumps(second)
        await peer.reply(streamed("resp-2", "second answer"))
        again = await peer.next_request()  # the agent chose local: no trigger any more
        assert_summarization_request(again)
        await peer.reply(streamed("resp-summary-2", "SUMMARY-TWO"))
        third = await peer.next_request()
        assert texts(third)[-4:] == ["first prompt", "second prompt", bridge("SUMMARY-TWO"), "third prompt"]
        assert "SUMMARY-ONE" not in json.dumps(third)  # an earlier summary is not kept as a user message
        await peer.reply(streamed("resp-3", "third answer"))

    log = EventLog()
    async with scripted(script, 30) as nursery, ta.open_agent(peer.config(workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("first prompt")).result()
        compaction = await agent.compact()
        result = await compaction.result()
        assert (result.final_message, result.response_id) == ("", "resp-summary-1")
        await (await agent.prompt("second prompt")).result()
        second_compaction = await agent.compact()
        await second_compaction.result()
        assert (await (await agent.prompt("third prompt")).result()).final_message == "third answer"
    (fallback,) = log.payloads("model.compaction.fallback")
    assert fallback == {"after_model_call_index": 0, "reason": "no_compaction_item", "response_id": "resp-declined",
                        "detail": "the compaction request was answered with message output and no compaction item"}
    assert [p["mode"] for p in log.payloads("model.compaction.started")] == ["remote", "local"]
    assert [(p["mode"], p["response_id"]) for p in log.payloads("model.compaction.completed")] == [
        ("local", "resp-summary-1"), ("local", "resp-summary-2")]
    for turn in (compaction, second_compaction):  # neither reply is the agent speaking
        kinds = turn_kinds(log, turn.turn_id)
        assert not [kind for kind in kinds if kind.startswith(("assistant.", "reasoning."))], kinds
        assert kinds[-1] == "run.completed" and kinds.count("run.completed") == 1
    assert [p["compactions"] for p in log.payloads("run.completed")] == [0, 1, 0, 1, 0]


async def test_auto_compaction_past_the_limit_falls_back_when_the_trigger_is_rejected(
    peer: Peer, workspace: Path
) -> None:
    async def script() -> None:
        await peer.next_request()
        await peer.reply(streamed("resp-1", "noted", usage=244_800))  # the auto-compact limit
        trigger = await peer.next_request()
        assert frames.is_compaction_request(trigger) and "second prompt" not in json.dumps(trigger)
        await decline_with_error(peer)
        summarize = await peer.next_request()
        assert_summarization_request(summarize)
        assert "second prompt" not in json.dumps(summarize)  # the new prompt joins after compaction
        await peer.reply(streamed("resp-summary", "the user wants things noted"))
        second = await peer.next_request()
        assert texts(second)[-3:] == ["first prompt", bridge("the user wants things noted"), "second prompt"]
        await peer.reply(streamed("resp-2", "done"))

    log = EventLog()
    async with scripted(script, 30) as nursery, ta.open_agent(peer.config(workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("first prompt")).result()
        assert (await (await agent.prompt("second prompt")).result()).final_message == "done"
    (fallback,) = log.payloads("model.compaction.fallback")
    assert fallback["reason"] == "compaction_unsupported" and fallback["response_id"] is None
    assert "compaction_trigger" in fallback["detail"]
    (completed,) = log.payloads("model.compaction.completed")
    assert completed["mode"] == "local" and completed["response_id"] == "resp-summary"
    assert not log.payloads("model.compaction.failed")
    assert [p["compactions"] for p in log.payloads("run.completed")] == [0, 1]


async def test_mid_turn_auto_compaction_summarizes_the_tool_output_and_the_turn_continues(
    peer: Peer, workspace: Path
) -> None:
    async def script() -> None:
        await peer.next_request()
        call = frames.custom_tool_call("call-exec", "exec", 'text("tool completed")', item_id="ctc-1")
        await peer.reply([frames.output_item_done(0, call),
                          frames.completed("resp-tool", [call], usage_block=frames.usage(250_000))])
        trigger = await peer.next_request()
        assert frames.is_compaction_request(trigger) and "tool completed" in json.dumps(trigger)
        await peer.reply(streamed("resp-declined", "ok"))
        summarize = await peer.next_request()
        assert_summarization_request(summarize)
        assert "tool completed" in json.dumps(summarize)  # the tool's output is in what is summarized
        await peer.reply(streamed("resp-summary", "ran the tool; it completed"))
        continuation = await peer.next_request()
        shown = texts(continuation)
        assert shown[-2:] == ["work", bridge("ran the tool; it completed")]  # the summary last, as codex does
        assert "tool completed" not in json.dumps(continuation)
        await peer.reply(streamed("resp-final", "finished"))

    log = EventLog()
    async with scripted(script, 30) as nursery, ta.open_agent(peer.config(workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("work")).result()).final_message == "finished"
    assert len(log.payloads("model.compaction.fallback")) == 1
    (completed,) = log.payloads("run.completed")
    assert completed["compactions"] == 1
    assert [p["text"] for p in log.payloads("assistant.message")] == ["finished"]



async def test_a_steer_during_a_local_compaction_is_sent_after_it_exactly_once(
    peer: Peer, workspace: Path
) -> None:
    summarizing, steered = trio.Event(), trio.Event()

    async def script() -> None:
        await peer.next_request()
        call = frames.custom_tool_call("call-1", "exec", 'text("big result")')
        await peer.reply([frames.completed("resp-tool", [call], usage_block=frames.usage(250_000))])
        assert frames.is_compaction_request(await peer.next_request())
        await peer.reply(streamed("resp-declined", "eh?"))
        summarize = await peer.next_request()
        assert_summarization_request(summarize)
        summarizing.set()
        await steered.wait()
        await peer.reply(streamed("resp-summary", "SUMMARY"))
        continuation = await peer.next_request()
        assert "steer during compaction" not in json.dumps(summarize)
        assert json.dumps(continuation).count("steer during compaction") == 1
        assert texts(continuation)[-2:] == [bridge("SUMMARY"), "steer during compaction"]
        await peer.reply(streamed("resp-final", "done"))

    async with scripted(script, 30), ta.open_agent(peer.config(workspace)) as agent:
        turn = await agent.prompt("work")
        await summarizing.wait()
        await turn.steer("steer during compaction", interrupt=True)
        steered.set()
        assert (await turn.result()).final_message == "done"
