"""Child threads over the protocol (``open_app_server(multi_agent=True)``;
docs/app-server.md, "Child threads").

A served thread's workers are threads of their own: ``thread/started`` once, their
turns under their own id, idle unload suspends them (``thread/closed``), and
``thread/resume`` of a suspended one asks its parent's agent to reload it -- which
needs the parent loaded, with that worker. The model is the seed's (``ParentAndChild``): the parent
calls one collaboration tool per turn, the child runs one cell, then answers. Every
message is checked against the schema (the harness client validates).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent.testing import AppServerClient, AppServerError, FakeConnection, frames

from ._harness import Harness, Json, app_server, run_turn, send_message, start_thread, text_input
from .test_approvals import command
from .test_thread_unsubscribe_seeds import ParentAndChild

TIMEOUT = 10  # seconds of Trio time


async def spawned(harness: Harness, model: ParentAndChild) -> tuple[AppServerClient, str, str]:
    """A client, a parent thread and the child thread its first turn spawned (its turn done)."""
    client = await harness.client()
    model.parent_id = parent_id = (await start_thread(client))["id"]
    model.tool = "spawn_agent"
    with trio.fail_after(TIMEOUT):
        await run_turn(client, parent_id, "Run spawn_agent")
        completed = await client.read_notification("turn/completed", lambda p: p["threadId"] != parent_id)
    return client, parent_id, completed["threadId"]


async def evicted(client: AppServerClient, thread_id: str) -> None:
    """Unsubscribe from ``thread_id`` and wait until it unloads (delay 0)."""
    assert await client.request("thread/unsubscribe", {"threadId": thread_id}) == {"status": "unsubscribed"}
    with trio.fail_after(TIMEOUT):
        await client.read_notification("thread/closed", lambda p: p["threadId"] == thread_id)


async def test_thread_resume_reloads_a_suspended_child_through_its_parent(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    model = ParentAndChild()
    async with app_server(tmp_path, model, unload_delay=0, multi_agent=True) as harness:
        client, parent_id, child_id = await spawned(harness, model)
        before = (await client.request("thread/read", {"threadId": child_id, "includeTurns": True}))["thread"]
        await evicted(client, child_id)
        assert (await client.request("thread/read", {"threadId": child_id}))["thread"]["status"] == {
            "type": "notLoaded"}
        client.take_pending()
        with trio.fail_after(TIMEOUT):
            resumed = await client.request("thread/resume", {"threadId": child_id})
        loaded = await client.request("thread/loaded/list", {})
        seen = client.take_pending()
        # Subscribed again: its next turn's notifications reach this client.
        model.tool = "followup_task"
        with trio.fail_after(TIMEOUT):
            await run_turn(client, parent_id, "Run followup_task")
            again = await client.read_notification("turn/completed", lambda p: p["threadId"] == child_id)
    thread = resumed["thread"]
    assert thread["id"] == child_id and thread["parentThreadId"] == parent_id and thread["agentNickname"] == "worker"
    assert thread["status"] == {"type": "idle"}
    assert [turn["id"] for turn in thread["turns"]] == [turn["id"] for turn in before["turns"]]  # same ids
    assert sorted(loaded["data"]) == sorted([parent_id, child_id])
    assert not [m for m in seen if m.get("method") == "thread/started"]  # a reload, not a new thread
    assert again["turn"]["status"] == "completed"


async def test_a_child_closes_with_its_parent_and_cannot_resume_without_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    model = ParentAndChild()
    async with app_server(tmp_path, model, unload_delay=0, multi_agent=True) as harness:
        client, parent_id, child_id = await spawned(harness, model)
        assert await client.request("thread/unsubscribe", {"threadId": parent_id}) == {"status": "unsubscribed"}
        with trio.fail_after(TIMEOUT):  # the parent unloads; its agent closes the worker: the child closes too
            await client.read_notification("thread/closed", lambda p: p["threadId"] == parent_id)
        closed = [m["params"]["threadId"] for m in client.take_pending() if m.get("method") == "thread/closed"]
        if child_id not in closed:
            with trio.fail_after(TIMEOUT):
                await client.read_notification("thread/closed", lambda p: p["threadId"] == child_id)
        assert (await client.request("thread/loaded/list", {}))["data"] == []
        with pytest.raises(AppServerError) as orphaned:
            await client.request("thread/resume", {"threadId": child_id})
        assert (await client.request("thread/loaded/list", {}))["data"] == []
        # A cold-resumed parent is a new agent: the worker it had is not among its workers.
        await client.request("thread/resume", {"threadId": parent_id})
        with pytest.raises(AppServerError) as gone:
            await client.request("thread/resume", {"threadId": child_id})
        assert (await client.request("thread/loaded/list", {}))["data"] == [parent_id]
        read = (await client.request("thread/read", {"threadId": child_id, "includeTurns": True}))["thread"]
    for caught in (orphaned, gone):
        assert caught.value.code == -32600
        assert caught.value.message.startswith(f"cannot resume an unloaded multi-agent v2 sub-agent {child_id}: ")
    assert f"its parent thread {parent_id} is not loaded" in orphaned.value.message
    assert "runs no worker named 'worker'" in gone.value.message
    assert read["status"] == {"type": "notLoaded"} and len(read["turns"]) == 1  # its record stays readable


class ChildRunsACommand:
    """The parent spawns ``worker``, then is done; the child runs ``touch child.txt`` in a
    cell (reporting what happened), then answers."""

    def __init__(self) -> None:
        self.parent_id = ""
        self.child_outputs: list[str] = []

    async def __call__(self, conn: FakeConnection, request: Json) -> None:
        body = json.dumps(request["input"])
        if request["client_metadata"]["session_id"] == self.parent_id:
            if "spawn-1" in body:
                await conn.send(frames.completed("parent-done", []))
            else:
                args = json.dumps({"name": "worker", "task": "make the file"})
                call = frames.function_call("spawn-1", "spawn_agent", args, namespace="collaboration")
                await conn.send(frames.output_item_done(0, call))
                await conn.send(frames.completed("parent-call", [call]))
            return
        outputs = [item for item in request["input"] if item.get("type") == "custom_tool_call_output"]
        if not outputs:
            call = frames.custom_tool_call("child-exec", "exec", command("touch child.txt"))
            await conn.send(frames.output_item_done(0, call))
            await conn.send(frames.completed("child-exec", [call]))
            return
        self.child_outputs.append(json.dumps(outputs[-1]["output"]))
        await send_message(conn, "child-done", "made it", item_id="child-result")


async def test_a_childs_approval_is_asked_in_the_child_thread(tmp_path: Path) -> None:
    model = ChildRunsACommand()
    async with app_server(tmp_path, model, multi_agent=True) as harness:
        client = await harness.client()
        with trio.fail_after(30):
            model.parent_id = parent_id = (await start_thread(client, approvalPolicy="untrusted"))["id"]
            await client.request("turn/start", {"threadId": parent_id, "input": text_input("spawn")})
            request = await client.read_server_request("item/commandExecution/requestApproval")
            before = client.take_pending()
            await client.respond(request.id, {"decision": "accept"})
            done = await client.read_notification("turn/completed", lambda p: p["threadId"] != parent_id)
    child_id = done["threadId"]
    assert request.params["threadId"] == child_id and request.params["itemId"] == "child-exec/code-1"
    assert request.params["commandActions"] == [{"type": "unknown", "command": "touch child.txt"}]
    assert request.params["command"].endswith("c 'touch child.txt'")  # the shell's line, as the item shows it
    waiting = [m["params"] for m in before if m.get("method") == "thread/status/changed"
               and m["params"]["status"].get("activeFlags") == ["waitingOnApproval"]]
    assert [params["threadId"] for params in waiting] == [child_id]  # the child waits, not its parent
    assert (harness.workspace / "child.txt").exists() and "ok 0:" in model.child_outputs[0]


async def test_a_child_whose_record_is_damaged_reloads_unrecorded_and_the_parent_lives_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Issue 21: the record is data. Mail reloading a suspended worker whose record was
    # damaged meanwhile must not end the parent's agent (before: InvalidSessionSnapshot
    # escaped the worker's watch); the damaged file is kept as it was.
    model = ParentAndChild()
    async with app_server(tmp_path, model, unload_delay=0, multi_agent=True) as harness:
        client, parent_id, child_id = await spawned(harness, model)
        await evicted(client, child_id)
        record = next(tmp_path.rglob(f"{child_id}.jsonl"))
        damaged = record.read_bytes() + b'{"type": "turn", "turn": ' + b"[" * 5000 + b"\n"
        record.write_bytes(damaged)
        client.take_pending()
        model.tool = "followup_task"
        with trio.fail_after(TIMEOUT):
            done = await run_turn(client, parent_id, "Run followup_task")
            again = await client.read_notification("turn/completed", lambda p: p["threadId"] == child_id)
        warnings = [m["params"] for m in client.take_pending() if m.get("method") == "warning"]
        # The positive control of the same server: the parent goes on with another turn.
        model.tool = "send_message"
        with trio.fail_after(TIMEOUT):
            later = await run_turn(client, parent_id, "Run send_message")
    assert done["turn"]["status"] == "completed" and later["turn"]["status"] == "completed"
    assert again["turn"]["status"] == "completed"
    assert [w["threadId"] for w in warnings] == [parent_id]
    assert f"child thread {child_id} runs without a record" in warnings[0]["message"]
    assert record.name in warnings[0]["message"]
    assert record.read_bytes() == damaged
