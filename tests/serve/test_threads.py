"""Threads over the protocol: read, list, fork, resume, audiences, many clients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent._rollout import read_history
from trio_agent.testing import AppServerError, FakeConnection, frames

from ._harness import Json, app_server, run_turn, send_message, start_thread, text_input


async def test_read_shows_the_turns_loaded_or_not_with_the_ids_the_notifications_had(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client = await harness.client()
        thread = await start_thread(client, cwd=str(harness.workspace))
        thread_id = thread["id"]
        assert thread["turns"] == [] and thread["ephemeral"] is False and thread["path"].endswith(".jsonl")
        first = await run_turn(client, thread_id, "hello")
        user_item = next(m["params"]["item"] for m in client.take_pending("item/completed")
                         if m["params"]["item"]["type"] == "userMessage")
        live = await client.request("thread/read", {"threadId": thread_id, "includeTurns": True})
        assert live["thread"]["status"] == {"type": "idle"} and live["thread"]["preview"] == "hello"
        (turn,) = live["thread"]["turns"]
        assert turn["id"] == first["turn"]["id"] and turn["itemsView"] == "full" and turn["items"][0] == user_item
        assert [item["type"] for item in turn["items"]] == ["userMessage", "agentMessage"]
        brief = await client.request("thread/read", {"threadId": thread_id})
        assert brief["thread"]["turns"] == []

        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed")
        cold = await client.request("thread/read", {"threadId": thread_id, "includeTurns": True})
        assert cold["thread"]["status"] == {"type": "notLoaded"}
        assert cold["thread"]["turns"] == live["thread"]["turns"] and cold["thread"]["path"] == live["thread"]["path"]
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/read", {"threadId": "01a230c2-7dc6-7f80-89ae-df3d5f8ebcde"})
        assert caught.value.code == -32600 and "thread not found" in caught.value.message


async def test_a_thread_that_never_ran_a_turn_resumes_cold(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await harness.model.wait_for_warmups(1)
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed")
        resumed = await client.request("thread/resume", {"threadId": thread_id})
        assert resumed["thread"]["status"] == {"type": "idle"} and resumed["thread"]["turns"] == []
        completed = await run_turn(client, thread_id, "first words")
        assert completed["turn"]["status"] == "completed"


async def test_list_pages_the_durable_threads_newest_first(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        ids = []
        for prompt in ("alpha task", "beta task", "gamma task"):
            thread_id = (await start_thread(client))["id"]
            await run_turn(client, thread_id, prompt)
            ids.append(thread_id)
            await trio.sleep(1.5)  # distinct creation seconds
        ephemeral = (await start_thread(client, ephemeral=True))["id"]
        page = await client.request("thread/list", {"limit": 2})
        assert [t["id"] for t in page["data"]] == [ids[2], ids[1]] and page["nextCursor"] is not None
        rest = await client.request("thread/list", {"limit": 2, "cursor": page["nextCursor"]})
        assert [t["id"] for t in rest["data"]] == [ids[0]] and rest["nextCursor"] is None
        assert ephemeral not in json.dumps(page) + json.dumps(rest)
        found = await client.request("thread/list", {"searchTerm": "BETA"})
        assert [t["id"] for t in found["data"]] == [ids[1]] and found["data"][0]["preview"] == "beta task"
        oldest = await client.request("thread/list", {"sortDirection": "asc"})
        assert [t["id"] for t in oldest["data"]] == ids
        elsewhere = await client.request("thread/list", {"cwd": "/somewhere/else"})
        assert elsewhere["data"] == []
        assert (await client.request("thread/list", {"archived": True}))["data"] == []


async def test_fork_starts_a_new_thread_from_the_source_history(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        source = (await start_thread(client))["id"]
        first = await run_turn(client, source, "remember the number 41")
        forked = await client.request("thread/fork", {"threadId": source})
        fork_id = forked["thread"]["id"]
        assert fork_id != source and forked["thread"]["forkedFromId"] == source
        assert [t["id"] for t in forked["thread"]["turns"]] == [first["turn"]["id"]]
        started = await client.read_notification("thread/started", lambda p: p["thread"]["id"] == fork_id)
        assert started["thread"]["forkedFromId"] == source
        await run_turn(client, fork_id, "what was it?")
        branch_request = harness.model.requests[-1]
        assert "remember the number 41" in json.dumps(branch_request["input"])
        assert sorted((await client.request("thread/loaded/list"))["data"]) == sorted([source, fork_id])
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/fork", {"threadId": (await start_thread(client))["id"]})
        assert "no history to fork" in caught.value.message


async def test_thread_notifications_reach_everyone_and_turn_notifications_only_subscribers(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        owner = await harness.client()
        watcher = await harness.client()
        thread_id = (await start_thread(owner))["id"]
        assert (await watcher.read_notification("thread/started"))["thread"]["id"] == thread_id
        await run_turn(owner, thread_id, "hello")
        status = await watcher.read_notification("thread/status/changed", lambda p: p["status"]["type"] == "idle")
        assert status["threadId"] == thread_id
        assert watcher.pending("turn/started") == [] and watcher.pending("item/completed") == []
        # A warm resume subscribes the second client too: both see the next turn.
        await watcher.request("thread/resume", {"threadId": thread_id})
        completed = await run_turn(owner, thread_id, "again")
        seen = await watcher.read_notification("turn/completed")
        assert seen["turn"]["id"] == completed["turn"]["id"]


async def test_a_client_that_goes_away_is_unsubscribed_and_its_turn_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    release = trio.Event()

    async def held(conn: FakeConnection, request: Json) -> None:
        await release.wait()
        await send_message(conn, "resp-1", "finished anyway")

    async with app_server(tmp_path, held, unload_delay=5) as harness:
        leaver = await harness.client()
        watcher = await harness.client()
        thread_id = (await start_thread(leaver))["id"]
        await leaver.request("turn/start", {"threadId": thread_id, "input": text_input("long job")})
        await harness.model.wait_for_request_count(1)
        await leaver.aclose()  # the client goes away mid-turn
        await trio.sleep(60)
        assert (await watcher.request("thread/loaded/list"))["data"] == [thread_id]  # the turn keeps it
        release.set()
        idle = await watcher.read_notification("thread/status/changed", lambda p: p["status"]["type"] == "idle")
        ended = trio.current_time()
        assert idle["threadId"] == thread_id
        await watcher.read_notification("thread/closed")  # nobody is subscribed any more
        assert trio.current_time() - ended == pytest.approx(5, abs=1e-6)
        read = await watcher.request("thread/read", {"threadId": thread_id, "includeTurns": True})
        (turn,) = read["thread"]["turns"]
        assert turn["status"] == "completed" and turn["items"][-1]["text"] == "finished anyway"


async def test_closing_the_server_ends_running_turns_with_their_notifications(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def never(conn: FakeConnection, request: Json) -> None:
        await trio.sleep_forever()

    async with app_server(tmp_path, never) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        started = await client.request("turn/start", {"threadId": thread_id, "input": text_input("never ends")})
        await harness.model.wait_for_request_count(1)
        await harness.app.aclose()
        completed = await client.read_notification("turn/completed")
        assert completed["turn"]["id"] == started["turn"]["id"] and completed["turn"]["status"] == "interrupted"
        await client.read_notification("thread/status/changed", lambda p: p["status"]["type"] == "notLoaded")
        assert await client.read_notification("thread/closed") == {"threadId": thread_id}
        with pytest.raises(trio.EndOfChannel):
            await client.read_notification("anything")  # then the server closed the connection
    rollout = next((tmp_path / "home" / "sessions").rglob("*.jsonl"))
    _meta, history = read_history(rollout)
    prompt, marker = history[-2:]
    assert prompt["content"][0]["text"] == "never ends"  # the cancelled turn's committed history...
    assert marker["content"][0]["text"].startswith("<turn_aborted>")  # ...marker included, on disk


async def test_a_client_too_slow_to_read_is_dropped_and_nobody_else_waits(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def chatty(conn: FakeConnection, request: Json) -> None:  # 100 deltas
        response_id = f"resp-{len(conn.requests)}"
        message = frames.assistant_message("word " * 100, item_id=f"msg-{response_id}", phase="final_answer")
        await conn.send(frames.output_item_added(0, {**message, "status": "in_progress", "content": []}))
        for _ in range(100):
            await conn.send(frames.text_delta(0, "word "))
        await conn.send(frames.output_item_done(0, message))
        await conn.send(frames.completed(response_id, [message]))

    async with app_server(tmp_path, chatty, outgoing_limit=16) as harness:
        client = await harness.client()
        slow = await harness.client(lockstep=True)  # its writes wait for reads; it reads nothing from now on
        noisy = (await start_thread(client))["id"]
        await slow.request("thread/resume", {"threadId": noisy})  # subscribed: gets every delta
        await client.request("thread/unsubscribe", {"threadId": noisy})
        await client.request("turn/start", {"threadId": noisy, "input": text_input("talk a lot")})
        await harness.served[slow].wait()  # its queue filled: dropped
        await client.read_notification("thread/status/changed",
                                       lambda p: p["threadId"] == noisy and p["status"]["type"] == "idle")
        other = (await start_thread(client))["id"]
        completed = await run_turn(client, other, "and you?")
        assert completed["turn"]["status"] == "completed"
        assert await client.request("thread/unsubscribe", {"threadId": noisy}) == {"status": "notSubscribed"}


async def test_two_clients_cold_resuming_one_thread_at_once_share_its_load(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trio_agent._runtime._agent import Agent

    startup = Agent._startup
    loads: list[float] = []

    async def slow_startup(agent: Agent) -> None:  # a load that takes a second (say, a slow disk)
        loads.append(trio.current_time())
        await trio.sleep(1)
        await startup(agent)

    monkeypatch.setattr(Agent, "_startup", slow_startup)
    async with app_server(tmp_path, unload_delay=0) as harness:
        first = await harness.client()
        second = await harness.client()
        thread_id = (await start_thread(first))["id"]
        done = await run_turn(first, thread_id, "hello")
        await first.request("thread/unsubscribe", {"threadId": thread_id})
        await first.read_notification("thread/closed")
        # Both requests are in before either load finishes.
        asked = [await client.send_request("thread/resume", {"threadId": thread_id}) for client in (first, second)]
        answers = [await client.read_response(rid) for client, rid in zip((first, second), asked, strict=True)]
        for answer in answers:
            assert answer["thread"]["id"] == thread_id and answer["thread"]["status"] == {"type": "idle"}
            assert [t["id"] for t in answer["thread"]["turns"]] == [done["turn"]["id"]]
        assert (await first.request("thread/loaded/list"))["data"] == [thread_id]
        assert len(loads) == 2  # thread/start's, and the one cold load both resumes shared
        # One agent, both subscribed: a turn started by one is seen by the other.
        completed = await run_turn(first, thread_id, "again")
        seen = await second.read_notification("turn/completed")
        assert seen["turn"]["id"] == completed["turn"]["id"]
        assert len(harness.model.requests) == 2
