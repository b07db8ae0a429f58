"""Pending input around compaction: ports of codex_pending_input seeds (codex.md 3.6).

SPEC sec. 8 overrides the seeds in two ways, the same in every test here: compaction
is nanocodex's remote compaction (a request ending in ``compaction_trigger`` whose
reply holds one ``compaction`` item) where codex's test server answers with a
summary message; and the auto-compact limit is 90% of the model's window (244,800
tokens) where the seeds configure 100/200 tokens, so the ports send usage above it
(500,000) where the seeds send 500.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from .._helpers import user_texts
from ..conftest import EventLog, make_config, scripted, warm

PENDING = "pending input must survive the failed compaction"
OVER = 500_000  # above the auto-compact limit (and the window)
QUOTA = {"type": "response.failed", "response": {"id": "failed-compact", "status": "failed", "error": {
    "code": "insufficient_quota", "message": "quota exhausted"}}}


def compaction(content: str) -> dict[str, Any]:
    return frames.output_item_done(0, {"type": "compaction", "encrypted_content": content})


def recorded(path: Path) -> list[dict[str, Any]]:
    """Every history item a rollout recorded, in order (its ``response_item`` lines)."""
    return [line["payload"] for line in map(json.loads, path.read_text().splitlines())
            if line["type"] == "response_item"]


def saved(history: list[dict[str, Any]]) -> list[str]:
    found = []
    for item in history:
        if item.get("type") in ("message", "agent_message") and item.get("role", "user") == "user":
            found.extend(part["text"] for part in item.get("content") or []
                         if part.get("type") == "input_text" and part.get("text") == PENDING)
    return found


@pytest.mark.parametrize("pending", ["steer", "mail", "triggering_mail"])
@pytest.mark.parametrize("failure_point", ["pre_turn", "mid_turn"])
async def test_terminal_compaction_error_does_not_retry_pending_input(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, failure_point: str, pending: str
) -> None:
    """The seed's queue-only mail is posted before the prompt in both cases. Mail
    waiting when a turn starts joins its first request (issue 27 item 3), so in
    ``mid_turn-mail`` the mail is delivered (and recorded) by the first request, where
    codex still holds it when the compaction fails -- exactly once either way; in
    ``pre_turn-mail`` the compaction fails before the turn records anything, and the
    failure records the mail."""
    failed_turns = 2 if pending == "triggering_mail" else 1
    asked, release = trio.Event(), trio.Event()
    compaction_requests: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        requests.append(await conn.next_request())
        initial = (frames.assistant_message("first answer", item_id="initial") if failure_point == "pre_turn"
                   else frames.function_call("call-1", "test_tool", "{}"))
        await conn.send(frames.completed("initial", [initial], usage_block=frames.usage(OVER)))
        for turn in range(failed_turns):
            request = await conn.next_request()
            requests.append(request)
            compaction_requests.append(request)
            if turn == 0:
                asked.set()
                await release.wait()
            await conn.send(QUOTA)
        requests.append(await conn.next_request())  # the later explicit prompt: compaction works
        await conn.send(compaction("RECOVERED_COMPACTION"))
        await conn.send(frames.completed("recovered-compact", [], usage_block=frames.usage(50)))
        requests.append(await conn.next_request())
        await conn.send(frames.completed("recovered", [frames.assistant_message("recovered answer")],
                                         usage_block=frames.usage(60)))

    log = EventLog()
    home = tmp_path / "home"
    config = make_config(server, workspace, rollout=ta.RolloutConfig(home))
    async with scripted(script, 30) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        if failure_point == "pre_turn":
            assert (await (await agent.prompt("initial prompt")).result()).final_message == "first answer"
        if pending == "mail":
            await agent.post_mail("/root/worker", PENDING)
        turn = await agent.prompt("prompt that needs compaction")
        await asked.wait()
        if pending == "steer":
            await turn.steer(PENDING)
        elif pending == "triggering_mail":
            assert await agent.post_mail("/root/worker", PENDING, trigger_turn=True) is None  # busy: waits
        release.set()
        with pytest.raises(ta.TurnFailed) as info:
            await turn.result()
        assert isinstance(info.value.responses_error, ta.UsageLimitExceeded)
        await trio.testing.wait_all_tasks_blocked()
        failures = log.payloads("run.failed")
        assert len(failures) == failed_turns  # triggering mail started exactly one more turn
        # The seed's load_history, where the seed reads it: after the failure, before any
        # later turn could record (or resend) what the failed turn had taken. Every item
        # the rollout recorded, not only what a later compaction kept: the pending input
        # is there exactly once.
        await agent.flush_rollout()
        assert agent.rollout is not None
        path = agent.rollout.path
        after_failure = recorded(path)
        assert saved(after_failure) == [PENDING]
        assert user_texts({"input": after_failure}).count("prompt that needs compaction") == 1
        retry = await agent.prompt("retry after quota resets")
        assert (await retry.result()).final_message == "recovered answer"
        await agent.flush_rollout()
    errors = [p["message"] for p in log.payloads("run.error")]
    assert len(errors) == failed_turns and all("insufficient_quota" in e for e in errors)
    assert len(requests) == 3 + failed_turns
    assert all(body["input"][-1] == {"type": "compaction_trigger"} for body in compaction_requests)
    assert all(PENDING not in str(body) for body in compaction_requests)  # a compaction never carries it
    # And the later explicit turn recorded none of it again.
    assert recorded(path)[:len(after_failure)] == after_failure
    assert saved(recorded(path)) == [PENDING]
    assert user_texts({"input": recorded(path)}).count("prompt that needs compaction") == 1


async def test_steered_user_input_waits_for_model_continuation_after_mid_turn_compact(
    server: FakeResponsesServer, workspace: Path
) -> None:
    bodies: list[dict[str, Any]] = []
    running = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        bodies.append(await conn.next_request())
        running.set()
        await trio.testing.wait_all_tasks_blocked()  # the steer is in before the response ends
        await conn.send(frames.completed("resp-1", [frames.function_call("call-1", "test_tool", "{}")],
                                         usage_block=frames.usage(OVER)))
        bodies.append(await conn.next_request())  # the compaction
        await conn.send_all([compaction("AUTO_COMPACT_SUMMARY"),
                             frames.completed("resp-compact", [], usage_block=frames.usage(50))])
        bodies.append(await conn.next_request())  # the model's continuation, alone
        await conn.send_completed("resp-post-compact", [frames.assistant_message("resumed old task")],
                                  usage_block=frames.usage(60))
        bodies.append(await conn.next_request())  # then the steer
        await conn.send_completed("resp-steered", [frames.assistant_message("processed steered prompt")],
                                  usage_block=frames.usage(70))

    async with scripted(script, 20), ta.open_agent(make_config(server, workspace)) as agent:
        turn = await agent.prompt("first prompt")
        await running.wait()
        await turn.steer("second prompt")
        assert (await turn.result()).final_message == "processed steered prompt"
    first, compact, post_compact, steered = bodies
    assert "second prompt" not in user_texts(first)
    assert compact["input"][-1] == {"type": "compaction_trigger"} and "second prompt" not in user_texts(compact)
    assert "second prompt" not in user_texts(post_compact)
    assert "second prompt" in user_texts(steered)


async def test_steered_user_input_follows_compact_when_only_the_steer_needs_follow_up(
    server: FakeResponsesServer, workspace: Path
) -> None:
    bodies: list[dict[str, Any]] = []
    answered, gate = trio.Event(), trio.Event()

    async def script() -> None:
        conn = await warm(server)
        bodies.append(await conn.next_request())
        await conn.send_assistant_output(0, "msg-1", "final_answer", "first answer")
        answered.set()
        await gate.wait()
        await conn.send(frames.completed("resp-1", [frames.assistant_message("first answer", item_id="msg-1")],
                                         usage_block=frames.usage(OVER)))
        bodies.append(await conn.next_request())  # the compaction, without the steer
        await conn.send_all([compaction("AUTO_COMPACT_SUMMARY"),
                             frames.completed("resp-compact", [], usage_block=frames.usage(50))])
        bodies.append(await conn.next_request())  # the steer, with no empty resume request first
        await conn.send_completed("resp-steered", [frames.assistant_message("processed steered prompt")],
                                  usage_block=frames.usage(70))

    log = EventLog()
    async with scripted(script, 20) as nursery, ta.open_agent(make_config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("first prompt")
        await answered.wait()
        await log.wait_for(lambda e: e.kind.value == "assistant.message")
        await turn.steer("second prompt")
        gate.set()
        assert (await turn.result()).final_message == "processed steered prompt"
    assert len(bodies) == 3
    _, compact, steered = bodies
    assert compact["input"] == [{"type": "compaction_trigger"}]  # chained: nothing else is new
    assert "second prompt" not in user_texts(compact)
    assert "second prompt" in user_texts(steered)


async def test_steered_user_input_waits_when_tool_output_triggers_compact_before_next_request(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """The tool's output (not the usage) pushes the context over the limit: the local
    estimate of a 1.2 MB output, as the seed's 4,000-character output does against its
    200-token limit."""
    bodies: list[dict[str, Any]] = []
    running, gate = trio.Event(), trio.Event()

    async def big(ctx: ta.ToolContext, args: Any) -> str:
        return "0" * 1_200_000

    async def script() -> None:
        conn = await warm(server)
        bodies.append(await conn.next_request())
        await conn.send(frames.response_created("resp-1"))
        running.set()
        await gate.wait()
        await conn.send(frames.completed("resp-1", [frames.function_call("call-1", "big", "{}")],
                                         usage_block=frames.usage(100)))
        bodies.append(await conn.next_request())  # compaction
        await conn.send_all([compaction("TOOL_OUTPUT_SUMMARY"),
                             frames.completed("resp-compact", [], usage_block=frames.usage(50))])
        bodies.append(await conn.next_request())  # the continuation
        await conn.send_completed("resp-post-compact", [
            frames.assistant_message("resumed after compacting tool output")], usage_block=frames.usage(60))
        bodies.append(await conn.next_request())  # the steer
        await conn.send_completed("resp-steered", [frames.assistant_message("processed steered prompt")],
                                  usage_block=frames.usage(70))

    tools = ta.Tools.default().function("big", "A big output.", {"type": "object"}, big)
    async with scripted(script, 20), ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        turn = await agent.prompt("first prompt")
        await running.wait()
        await turn.steer("second prompt")
        gate.set()
        assert (await turn.result()).final_message == "processed steered prompt"
    assert len(bodies) == 4
    _, compact, post_compact, steered = bodies
    assert "second prompt" not in user_texts(compact)
    assert "second prompt" not in user_texts(post_compact)
    assert "second prompt" in user_texts(steered)


async def test_steer_during_compaction_is_sent_after_compaction(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """The seed's exact replies after the compaction: ``resp-follow-up``,
    ``resp-extra-compaction``, ``resp-steered`` (served as far as the client asks). The
    seed enables InstantInterrupt, i.e. ``steer(..., interrupt=True)`` here. Its replies
    are empty completions, which codex ends a turn with; this runtime (nanocodex, SPEC
    sec. 6) refuses a response with neither a message nor a tool call, so each reply
    carries a final message."""
    compacting, steered = trio.Event(), trio.Event()
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        bodies.append(await conn.next_request())
        await conn.send(frames.completed("resp-first", [frames.function_call("call-1", "test_tool", "{}")],
                                         usage_block=frames.usage(OVER)))
        bodies.append(await conn.next_request())
        compacting.set()
        await steered.wait()
        await conn.send_all([compaction("AUTO_COMPACT_SUMMARY"),
                             frames.completed("resp-compact", [], usage_block=frames.usage(50))])
        for response_id in ("resp-follow-up", "resp-extra-compaction", "resp-steered"):
            try:
                bodies.append(await conn.next_request())
            except Exception:  # the client is done and closed the socket
                return
            await conn.send_final(response_id, "done")

    async with scripted(script, 20), ta.open_agent(make_config(server, workspace)) as agent:
        turn = await agent.prompt("first prompt")
        await compacting.wait()
        await turn.steer("old steer", interrupt=True)
        steered.set()
        assert (await turn.result()).final_message == "done"
    steer_counts = [user_texts(body).count("old steer") for body in bodies[2:]]
    assert 1 in steer_counts, steer_counts
    assert all(count <= 1 for count in steer_counts)
    assert "old steer" not in user_texts(bodies[1])  # never in the compaction request
