"""``thread/compact/start`` and auto-compaction over ``trio-agent serve`` on a Responses
server without remote compaction (issue 23, item 3): the compaction completes locally
and shows as a ``contextCompaction`` item and ``thread/compacted`` -- never as an
``agentMessage`` -- and a failed one fails as before. Every server message is checked
against the codex app-server schema (the harness's client validates each)."""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.testing

from trio_agent._session.summary import SUMMARY_PREFIX
from trio_agent.testing import AppServerClient, FakeConnection, frames

from ._harness import Json, app_server, send_message, start_thread
from .test_items import items, methods, turn
from .test_rollback import _edit_record, _refused


async def plain(conn: FakeConnection, request: Json) -> None:
    """A server that knows nothing of compaction: everything gets a streamed answer (the
    summarization request, too: its answer is the summary)."""
    n = len(conn.requests)
    if frames.is_summarization_request(request):
        await send_message(conn, f"resp-summary-{n}", "SUMMARY: the user asked to remember this")
    elif frames.is_compaction_request(request):
        await send_message(conn, f"resp-declined-{n}", "I cannot compact anything.")
    else:
        await send_message(conn, f"resp-{n}", "noted")


async def compact(client: AppServerClient, thread_id: str) -> tuple[Json, list[Json]]:
    """``thread/compact/start``; its ``turn/completed`` params and what else it caused."""
    client.take_pending()
    assert await client.request("thread/compact/start", {"threadId": thread_id}) == {}
    turn_id = (await client.read_notification("turn/started"))["turn"]["id"]
    completed = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)
    return completed, client.take_pending()


async def test_manual_compaction_on_a_plain_server_is_a_context_compaction_not_an_agent_message(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, plain) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await turn(client, thread_id, "remember this")
        completed, seen = await compact(client, thread_id)
        _, after = await turn(client, thread_id, "and now?")
        again, seen_again = await compact(client, thread_id)
    turn_id = completed["turn"]["id"]
    assert completed["turn"]["status"] == "completed" and completed["turn"]["items"] == []
    assert methods(seen) == ["thread/status/changed", "item/started", "item/completed", "thread/compacted",
                             "thread/status/changed"]
    (compaction,) = items(seen, "contextCompaction")
    assert compaction["id"] == f"compaction-{turn_id}-1"
    assert seen[3]["params"] == {"threadId": thread_id, "turnId": turn_id}
    assert not [m for m in seen + seen_again if "agentMessage" in json.dumps(m)]
    assert again["turn"]["status"] == "completed" and methods(seen_again) == methods(seen)
    requests = harness.model.requests
    assert frames.is_compaction_request(requests[1]) and frames.is_summarization_request(requests[2])
    assert frames.is_summarization_request(requests[4])  # the thread's agent went straight to local
    replayed = json.dumps(requests[3])
    assert f"{SUMMARY_PREFIX}\\nSUMMARY: the user asked to remember this" in replayed
    assert "I cannot compact" not in replayed
    assert [item["text"] for item in items(after, "agentMessage")] == ["noted"]


async def test_auto_compaction_on_a_plain_server_shows_one_answer_and_a_context_compaction(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def model(conn: FakeConnection, request: Json) -> None:
        n = len(conn.requests)
        if frames.is_summarization_request(request) or frames.is_compaction_request(request):
            await plain(conn, request)
        else:  # a full context: the next turn compacts before sampling
            message = frames.assistant_message("noted", item_id=f"msg-{n}", phase="final_answer")
            await conn.send(frames.output_item_done(0, message))
            await conn.send(frames.completed(f"resp-{n}", [message], usage_block=frames.usage(372_001)))

    async with app_server(tmp_path, model) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        _, first = await turn(client, thread_id, "fill the context")
        completed, second = await turn(client, thread_id, "and more")
    assert completed["turn"]["status"] == "completed"
    assert items(first, "contextCompaction") == []
    (compaction,) = items(second, "contextCompaction")
    assert compaction["id"].startswith("compaction-")
    (compacted,) = [m["params"] for m in second if m.get("method") == "thread/compacted"]
    assert compacted == {"threadId": thread_id, "turnId": completed["turn"]["id"]}
    assert [item["text"] for item in items(second, "agentMessage")] == ["noted"]  # the answer alone
    assert "I cannot compact" not in json.dumps(second) and "SUMMARY:" not in json.dumps(second)


async def test_a_failed_local_compaction_fails_its_turn_as_before(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def model(conn: FakeConnection, request: Json) -> None:
        if frames.is_summarization_request(request):
            await conn.send(frames.error_frame("the summarizer is down", code="invalid_request_error"))
        else:
            await plain(conn, request)

    async with app_server(tmp_path, model) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await turn(client, thread_id, "remember this")
        failed, during = await compact(client, thread_id)
        _, after = await turn(client, thread_id, "still there?")
    assert failed["turn"]["status"] == "failed" and "the summarizer is down" in failed["turn"]["error"]["message"]
    assert len(items(during, "contextCompaction")) == 1
    assert not [m for m in during if m.get("method") == "thread/compacted"]
    assert not [m for m in during if "agentMessage" in json.dumps(m)]
    (error,) = [m["params"] for m in during if m.get("method") == "error"]
    assert error["turnId"] == failed["turn"]["id"] and error["willRetry"] is False
    assert [item["text"] for item in items(after, "agentMessage")] == ["noted"]
    last = harness.model.requests[-1]  # history as it was: chained on the first answer, no summary in it
    assert last["previous_response_id"] == "resp-2" and "SUMMARY" not in json.dumps(last)  # (warmup: 1)


async def test_a_rollback_without_cut_points_never_cuts_into_a_local_compactions_history(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A local compaction keeps copies of the user messages before its summary; finding a
    cut by prompts (a record without cut points) must not match one of those copies --
    it would cut the summary away -- as it never matches what is before a remote
    compaction's item."""
    async with app_server(tmp_path, plain, unload_delay=0) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await turn(client, thread_id, "same words")
        done, _ = await compact(client, thread_id)
        assert done["turn"]["status"] == "completed"
        await turn(client, thread_id, "other words")
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed", lambda p: p["threadId"] == thread_id)
        _edit_record(harness, thread_id, drop_cut_points=True, last_prompt="same words")
        await client.request("thread/resume", {"threadId": thread_id})
        await _refused(client, "thread/rollback", {"threadId": thread_id, "numTurns": 1}, -32600,
                       "the prompts of the turns to drop are not all in the history")
        _, after = await turn(client, thread_id, "still compacted?")
    assert f"{SUMMARY_PREFIX}\\nSUMMARY:" in json.dumps(harness.model.requests[-1])  # the summary is still there
    assert [item["text"] for item in items(after, "agentMessage")] == ["noted"]
