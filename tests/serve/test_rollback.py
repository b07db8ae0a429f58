"""``thread/rollback`` and ``thread/revert`` (issue 22 item 2; trio_agent/_serve/_rollback.py).

Dropping turns must drop them from what the model sees next, from the rollout (a cold
resume, a fork) and from the thread record (what ``thread/read`` shows), together; a
rollback that cannot be done exactly is refused and changes nothing. Both methods
answered -32601 on main. Every message is checked against the schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent._rollout import read_history
from trio_agent.testing import AppServerClient, AppServerError, FakeConnection

from ._harness import Harness, Json, app_server, run_turn, send_message, start_thread, text_input
from .test_items import compacting


def user_texts(items: list[Json]) -> list[str]:
    """The texts of the user messages in ``items`` (a request's input, a history)."""
    return [part["text"] for item in items if item.get("type") == "message" and item.get("role") == "user"
            for part in item.get("content", []) if isinstance(part.get("text"), str)]


def prompts(items: list[Json]) -> list[str]:
    """``user_texts`` without the environment context message."""
    return [text for text in user_texts(items) if not text.startswith("<environment_context>")]


async def turns_of(client: AppServerClient, thread_id: str) -> list[str]:
    read = await client.request("thread/read", {"threadId": thread_id, "includeTurns": True})
    return [turn["id"] for turn in read["thread"]["turns"]]


async def three_turns(client: AppServerClient) -> tuple[str, list[str]]:
    thread_id = (await start_thread(client))["id"]
    return thread_id, [(await run_turn(client, thread_id, text))["turn"]["id"] for text in ("one", "two", "three")]


def rollout_history(thread: Json) -> list[Json]:
    return read_history(Path(thread["path"]))[1]


async def test_rollback_drops_turns_from_the_model_the_rollout_and_the_record(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client, watcher = await harness.client(), await harness.client()
        thread_id, turns = await three_turns(client)
        await watcher.request("thread/resume", {"threadId": thread_id})  # a second subscriber
        rolled = await client.request("thread/rollback", {"threadId": thread_id, "numTurns": 2})
        assert [turn["id"] for turn in rolled["thread"]["turns"]] == turns[:1]
        assert rolled["thread"]["turns"][0]["itemsView"] == "full"
        assert await watcher.read_notification("thread/reverted") == {"threadId": thread_id}
        assert await turns_of(client, thread_id) == turns[:1]
        assert prompts(rollout_history(rolled["thread"])) == ["one"]
        fourth = (await run_turn(client, thread_id, "four"))["turn"]["id"]
        request = harness.model.requests[-1]
        assert request.get("previous_response_id") is None  # the server's chain no longer matches: a full replay
        assert prompts(request["input"]) == ["one", "four"]
        await watcher.request("thread/unsubscribe", {"threadId": thread_id})
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed")
        cold = await client.request("thread/resume", {"threadId": thread_id})
        assert [turn["id"] for turn in cold["thread"]["turns"]] == [turns[0], fourth]
        fifth = (await run_turn(client, thread_id, "five"))["turn"]["id"]
        assert prompts(harness.model.requests[-1]["input"]) == ["one", "four", "five"]
        forked = await client.request("thread/fork", {"threadId": thread_id})
        assert [turn["id"] for turn in forked["thread"]["turns"]] == [turns[0], fourth, fifth]
        assert prompts(rollout_history(forked["thread"])) == ["one", "four", "five"]


async def test_revert_drops_the_named_turn_and_every_later_one(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id, turns = await three_turns(client)
        reverted = await client.request("thread/revert", {"threadId": thread_id, "beforeTurnId": turns[1]})
        assert reverted["thread"]["id"] == thread_id and reverted["thread"]["turns"] == []
        assert reverted["turnsBackwardsCursor"] is None and reverted["itemsBackwardsCursor"] is None
        assert await client.read_notification("thread/reverted") == {"threadId": thread_id}
        assert await turns_of(client, thread_id) == turns[:1]
        await run_turn(client, thread_id, "again")
        assert prompts(harness.model.requests[-1]["input"]) == ["one", "again"]


async def test_rolling_back_every_turn_keeps_the_context_the_thread_runs_with(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id, _turns = await three_turns(client)
        rolled = await client.request("thread/rollback", {"threadId": thread_id, "numTurns": 3})
        assert rolled["thread"]["turns"] == [] and rolled["thread"]["preview"] == ""
        await run_turn(client, thread_id, "fresh start")
        request = harness.model.requests[-1]
        assert prompts(request["input"]) == ["fresh start"]
        # The first turn's permissions and environment messages stay: they still describe the thread.
        assert len([text for text in user_texts(request["input"]) if text.startswith("<environment_context>")]) == 1
        assert any(item.get("role") == "developer" and "<permissions instructions>" in json.dumps(item)
                   for item in request["input"])
        listed = await client.request("thread/list", {})
        assert listed["data"][0]["preview"] == "fresh start"


async def _refused(client: AppServerClient, method: str, params: Json, code: int, said: str) -> None:
    with pytest.raises(AppServerError) as caught:
        await client.request(method, params)
    assert caught.value.code == code and said in caught.value.message, caught.value.message


async def test_bad_requests_are_refused_and_change_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client = await harness.client()
        thread_id, turns = await three_turns(client)
        for params, said in (({"numTurns": 0}, "`numTurns` must be an integer >= 1"),
                             ({"numTurns": 4}, "has 3 turns"), ({}, "missing required field `numTurns`"),
                             ({"numTurns": "1"}, "`numTurns` must be")):
            await _refused(client, "thread/rollback", {"threadId": thread_id, **params}, -32602, said)
        await _refused(client, "thread/revert", {"threadId": thread_id, "beforeTurnId": "nope"}, -32602,
                       "is not a turn of thread")
        assert await turns_of(client, thread_id) == turns
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed")
        await _refused(client, "thread/rollback", {"threadId": thread_id, "numTurns": 1}, -32600,
                       "not loaded; call thread/resume first")


async def test_a_running_turn_is_never_rolled_back(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    release = trio.Event()

    async def slow(conn: FakeConnection, request: Json) -> None:
        if prompts(request["input"])[-1:] == ["slow"]:
            await release.wait()
        await send_message(conn, f"resp-{len(conn.requests)}", "Done")

    async with app_server(tmp_path, slow) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        first = (await run_turn(client, thread_id, "one"))["turn"]["id"]
        running = await client.request("turn/start", {"threadId": thread_id, "input": text_input("slow")})
        await harness.model.wait_for_request_count(2)
        for method, params in (("thread/rollback", {"numTurns": 1}), ("thread/revert", {"beforeTurnId": first})):
            await _refused(client, method, {"threadId": thread_id, **params}, -32600, "is running a turn")
        release.set()
        await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == running["turn"]["id"])
        assert await turns_of(client, thread_id) == [first, running["turn"]["id"]]
        # Once it has ended, it can be.
        rolled = await client.request("thread/rollback", {"threadId": thread_id, "numTurns": 1})
        assert [turn["id"] for turn in rolled["thread"]["turns"]] == [first]


async def test_a_compaction_is_never_rolled_back_through(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, compacting) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        first = (await run_turn(client, thread_id, "before"))["turn"]["id"]
        client.take_pending()
        await client.request("thread/compact/start", {"threadId": thread_id})
        compaction = (await client.read_notification("turn/started"))["turn"]["id"]
        await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == compaction)
        after = (await run_turn(client, thread_id, "after"))["turn"]["id"]
        await _refused(client, "thread/rollback", {"threadId": thread_id, "numTurns": 2}, -32600,
                       f"past turn {compaction}: it compacted the history")
        assert await turns_of(client, thread_id) == [first, compaction, after]
        rolled = await client.request("thread/rollback", {"threadId": thread_id, "numTurns": 1})  # after it: fine
        assert [turn["id"] for turn in rolled["thread"]["turns"]] == [first, compaction]
        await run_turn(client, thread_id, "again")
        request = harness.model.requests[-1]
        assert prompts(request["input"])[-1] == "again" and "after" not in prompts(request["input"])


async def _cold(client: AppServerClient, thread_id: str) -> None:
    await client.request("thread/unsubscribe", {"threadId": thread_id})
    await client.read_notification("thread/closed", lambda p: p["threadId"] == thread_id)
    await client.request("thread/resume", {"threadId": thread_id})


def _edit_record(harness: Harness, thread_id: str, *, drop_cut_points: bool = False,
                 last_prompt: str | None = None) -> None:
    """Make the record one written before turns kept where their history ends, or one
    whose last turn names a prompt the history does not have."""
    path = harness.home / "app-server" / "threads" / f"{thread_id}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    turns = [line["turn"] for line in lines if line["type"] == "turn"]
    for turn in turns:
        if drop_cut_points:
            del turn["history_end"]
    if last_prompt is not None:
        turns[-1]["items"][0]["content"][0]["text"] = last_prompt
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


async def test_without_a_recorded_cut_point_the_prompts_find_it_or_nothing_changes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client = await harness.client()
        old, old_turns = await three_turns(client)
        odd, odd_turns = await three_turns(client)
        for thread_id in (old, odd):
            await client.request("thread/unsubscribe", {"threadId": thread_id})
            await client.read_notification("thread/closed", lambda p, t=thread_id: p["threadId"] == t)
        _edit_record(harness, old, drop_cut_points=True)
        _edit_record(harness, odd, drop_cut_points=True, last_prompt="a prompt the model never saw")
        for thread_id in (old, odd):
            await client.request("thread/resume", {"threadId": thread_id})
        # A record written before cut points loads as it did, and its prompts say where to cut.
        assert await turns_of(client, old) == old_turns
        rolled = await client.request("thread/rollback", {"threadId": old, "numTurns": 2})
        assert [turn["id"] for turn in rolled["thread"]["turns"]] == old_turns[:1]
        await run_turn(client, old, "four")
        assert prompts(harness.model.requests[-1]["input"]) == ["one", "four"]
        # When the history does not have a dropped turn's prompt, nothing is guessed.
        await _refused(client, "thread/rollback", {"threadId": odd, "numTurns": 1}, -32600,
                       "the prompts of the turns to drop are not all in the history")
        assert await turns_of(client, odd) == odd_turns
        rolled_all = await client.request("thread/rollback", {"threadId": odd, "numTurns": 3})  # the start is known
        assert rolled_all["thread"]["turns"] == []


async def test_a_turn_queued_behind_a_compaction_is_rolled_back_by_its_prompt(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The compaction turn ends while the next prompt already waits, so its end is not
    recorded; the queued turn's prompt is where to cut."""
    async with app_server(tmp_path, compacting) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await run_turn(client, thread_id, "before")
        await client.request("thread/compact/start", {"threadId": thread_id})
        queued = await client.request("turn/start", {"threadId": thread_id, "input": text_input("queued")})
        await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == queued["turn"]["id"])
        turns = await turns_of(client, thread_id)
        assert len(turns) == 3 and turns[-1] == queued["turn"]["id"]
        await client.request("thread/revert", {"threadId": thread_id, "beforeTurnId": queued["turn"]["id"]})
        assert await turns_of(client, thread_id) == turns[:2]
        await run_turn(client, thread_id, "after")
        assert "queued" not in prompts(harness.model.requests[-1]["input"])
