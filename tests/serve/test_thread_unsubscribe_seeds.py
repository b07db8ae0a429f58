"""Ports of ``codex_thread_unsubscribe_tests.rs`` through the JSON-RPC server.

The server runs in process (``_harness``), its threads on the in-memory seam, under
``MockClock(autojump_threshold=0)``: each of the seed's ``timeout(250 ms | 1200 ms |
2200 ms, read_stream_until_notification_message("thread/closed"))`` windows is a
``move_on_after`` on Trio's clock, and the unloads they bracket happen at exact virtual
times (asserted where the seed implies them). ``thread_unload_delay_secs`` in the
seed's config.toml is the server's ``unload_delay``. The last port,
``v2_child_idle_eviction_preserves_mail_and_followup_context``, runs child threads
(``open_app_server(multi_agent=True)``); its comment says where our design differs.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeConnection, frames

from .._codex_frames import ev_assistant_message
from ._harness import Json, answer_done, app_server, assert_quiet, run_turn, send_message, start_thread

TIMEOUT = 10  # DEFAULT_READ_TIMEOUT, on Trio's clock


async def test_thread_unsubscribe_keeps_thread_loaded_until_idle_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=2) as harness:  # thread_unload_delay_secs = 2
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        # Persist a rollout so both warm and cold resumes can find the thread.
        with trio.fail_after(TIMEOUT):
            await run_turn(client, thread_id, "hello")

        unsubscribe = await client.request("thread/unsubscribe", {"threadId": thread_id})
        assert unsubscribe == {"status": "unsubscribed"}
        await assert_quiet(client, "thread/closed", 0.25)

        loaded = await client.request("thread/loaded/list", {})
        assert loaded == {"data": [thread_id], "nextCursor": None}

        resume = await client.request("thread/resume", {"threadId": thread_id})
        assert resume["thread"]["id"] == thread_id
        # Resubscribing cancels the pending unload, even after the original deadline.
        await assert_quiet(client, "thread/closed", 2.2)

        await client.request("thread/unsubscribe", {"threadId": thread_id})
        left = trio.current_time()
        # Losing the last subscriber starts a fresh countdown.
        await assert_quiet(client, "thread/closed", 0.25)
        with trio.fail_after(TIMEOUT):
            closed = await client.read_notification("thread/closed")
        assert closed == {"threadId": thread_id}
        assert trio.current_time() - left == pytest.approx(2.0, abs=1e-6)  # exactly the delay, on Trio's clock

        with trio.fail_after(TIMEOUT):
            status = await client.read_notification("thread/status/changed",
                                                    lambda p: p["status"] == {"type": "notLoaded"})
        assert status == {"threadId": thread_id, "status": {"type": "notLoaded"}}

        loaded = await client.request("thread/loaded/list", {})
        assert loaded == {"data": [], "nextCursor": None}

        resume = await client.request("thread/resume", {"threadId": thread_id})  # cold, from the rollout
        assert resume["thread"]["id"] == thread_id
        assert resume["thread"]["status"] == {"type": "idle"}


CALL_ID = "deterministic-wait-call"
TOOL_NAME = "deterministic_wait"
DYNAMIC_TOOL = {
    "name": TOOL_NAME,
    "description": "Deterministic wait tool",
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    "deferLoading": False,
}


@pytest.mark.parametrize(
    ("delay_secs", "expected_delay_secs", "thread_params"),
    [
        pytest.param(0, 0, {}, id="zero_delay"),
        pytest.param(1, 1, {}, id="one_second_delay"),
        pytest.param(0, 1, {"ephemeral": True, "config": {"thread_unload_delay_secs": 1}},
                     id="per_thread_one_second_delay"),
        pytest.param(1800, 0, {"ephemeral": True, "config": {"thread_unload_delay_secs": 0}},
                     id="immediate_ephemeral"),
        pytest.param(1800, 0, {"config": {"thread_unload_delay_secs": 0}}, id="immediate_persistent"),
    ],
)
async def test_thread_unsubscribe_during_turn_keeps_turn_running(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, delay_secs: int, expected_delay_secs: int,
    thread_params: Json,
) -> None:
    check_cold_resume = "config" in thread_params and not thread_params.get("ephemeral", False)
    finished_at: list[float] = []

    async def streaming_sse(conn: FakeConnection, request: Json) -> None:
        if len(finished_at) == 0 and not any(i.get("type") == "function_call_output" for i in request["input"]):
            call = frames.function_call(CALL_ID, TOOL_NAME, json.dumps({}))
            await conn.send(frames.response_created("resp-1"))
            await conn.send(frames.output_item_done(0, call))
            await conn.send(frames.completed("resp-1", [call]))
        else:
            await send_message(conn, "resp-2", "Done", item_id="msg-1")
            finished_at.append(trio.current_time())

    async with app_server(tmp_path, streaming_sse, unload_delay=delay_secs) as harness:
        client = await harness.client()
        thread = await start_thread(client, dynamicTools=[DYNAMIC_TOOL], **thread_params)
        thread_id = thread["id"]

        # A subscribed, idle thread stays loaded even with no unload delay.
        await assert_quiet(client, "thread/closed", 0.25)

        await client.request("turn/start", {"threadId": thread_id, "clientUserMessageId": None,
                                            "input": [{"type": "text", "text": "run deterministic tool",
                                                       "text_elements": []}]})
        with trio.fail_after(TIMEOUT):
            await harness.model.wait_for_request_count(1)
            started = await client.read_notification(
                "item/started", lambda p: p["item"]["type"] == "dynamicToolCall" and p["item"]["id"] == CALL_ID)
        assert started["threadId"] == thread_id

        with trio.fail_after(TIMEOUT):
            request = await client.read_server_request()
        assert request.method == "item/tool/call"
        assert request.params == {"threadId": thread_id, "turnId": started["turnId"], "callId": CALL_ID,
                                  "namespace": None, "tool": TOOL_NAME, "arguments": {}}

        unsubscribe = await client.request("thread/unsubscribe", {"threadId": thread_id})
        assert unsubscribe == {"status": "unsubscribed"}
        await assert_quiet(client, "thread/closed", 1.2)  # the blocked tool call keeps the turn, and the thread

        await client.respond(request.id, {"contentItems": [{"type": "inputText", "text": "dynamic-ok"}],
                                          "success": True})
        with trio.fail_after(TIMEOUT):
            await harness.model.wait_for_request_count(2)
        output = next(i for i in harness.model.requests[1]["input"] if i.get("type") == "function_call_output")
        assert output["call_id"] == CALL_ID
        assert output["output"] == [{"type": "input_text", "text": "dynamic-ok"}]

        if expected_delay_secs > 0:
            # Once the turn finishes, inactivity starts a fresh countdown.
            await assert_quiet(client, "thread/closed", 0.25)
        with trio.fail_after(TIMEOUT):
            closed = await client.read_notification("thread/closed")
        assert closed == {"threadId": thread_id}
        assert trio.current_time() - finished_at[0] == pytest.approx(expected_delay_secs, abs=1e-6)

        if check_cold_resume:
            # Immediate unloading preserves durable history. A cold resume uses the
            # server's default delay rather than restoring the old runtime's override.
            resume = await client.request("thread/resume", {"threadId": thread_id})
            assert resume["thread"]["id"] == thread_id
            assert len(resume["thread"]["turns"]) == 1
            await client.request("thread/unsubscribe", {"threadId": thread_id})
            await assert_quiet(client, "thread/closed", 0.25)


async def test_thread_unsubscribe_preserves_cached_status_before_idle_unload(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def sse_failed(conn: FakeConnection, request: Json) -> None:
        await conn.send({"type": "response.failed", "response": {
            "id": "resp-1", "error": {"code": "server_error", "message": "simulated failure"}}})

    # MockResponsesConfig writes stream_max_retries = 0 and request_max_retries = 0: one attempt.
    async with app_server(tmp_path, sse_failed, max_attempts=1) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await client.request("turn/start", {"threadId": thread_id, "clientUserMessageId": None,
                                            "input": [{"type": "text", "text": "fail this turn",
                                                       "text_elements": []}]})
        with trio.fail_after(TIMEOUT):
            error = await client.read_notification("error")
        assert error["willRetry"] is False and "simulated failure" in error["error"]["message"]

        read = await client.request("thread/read", {"threadId": thread_id, "includeTurns": False})
        assert read["thread"]["status"] == {"type": "systemError"}
        # The server reports the status it cached from the thread's events; the thread
        # manager under it (SPEC sec. 11) must say the same, or a client of
        # ``ta.ThreadManager`` would see a failed thread as idle.
        assert harness.app.threads.status(thread_id) is ta.ThreadStatus.SYSTEM_ERROR

        unsubscribe = await client.request("thread/unsubscribe", {"threadId": thread_id})
        assert unsubscribe == {"status": "unsubscribed"}
        await assert_quiet(client, "thread/closed", 0.25)

        resume = await client.request("thread/resume", {"threadId": thread_id, "cwd": str(harness.home)})
        assert resume["thread"]["status"] == {"type": "systemError"}
        assert harness.app.threads.status(thread_id) is ta.ThreadStatus.SYSTEM_ERROR


@pytest.mark.parametrize(
    "thread_params",
    [
        pytest.param({}, id="persistent"),
        pytest.param({"ephemeral": True}, id="ephemeral"),
        # ThreadSource::Feature("composer_predictions"): an analytics label of the thread,
        # which has no counterpart here; the server accepts it and ignores it.
        pytest.param({"threadSource": "composer_predictions"}, id="persistent_composer_prediction"),
    ],
)
async def test_thread_unsubscribe_reports_not_subscribed_before_idle_unload(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, thread_params: dict[str, Any]
) -> None:
    async with app_server(tmp_path, answer_done) as harness:  # codex's default delay (60 s)
        client = await harness.client()
        thread_id = (await start_thread(client, **thread_params))["id"]

        first = await client.request("thread/unsubscribe", {"threadId": thread_id})
        assert first == {"status": "unsubscribed"}
        second = await client.request("thread/unsubscribe", {"threadId": thread_id})
        assert second == {"status": "notSubscribed"}
        await assert_quiet(client, "thread/closed", 0.25)


# -- v2_child_idle_eviction_preserves_mail_and_followup_context --------------------------------
#
# Where our design overrides the seed (SPEC: this file wins where it differs, the README's
# "Agents that talk to each other" names our tools):
# - The tools are ours: ``collaboration.spawn_agent {name, task}`` (always a clean child: the
#   seed's ``fork_turns: "none"``), ``send_message {name, text}`` (queue-only mail) and
#   ``followup_task {name, text}`` (triggering mail) instead of ``task_name``/``target``/
#   ``message``. Multi-agent v2 is ``open_app_server(multi_agent=True)``, not a feature flag.
# - The failed reload: the seed makes a required MCP server fail its first initialize.
#   Here the reload fails the way a real one does when another process holds the thread
#   open for writing: the test holds the child's rollout lock, then lets it go.
# - The seed's trace-bundle checks (codex's rollout-trace feature: inference call ids, a
#   ``thread_started/ended/resumed`` lifecycle) have no counterpart; what they protect is
#   checked on the wire instead: every child turn completes under the same thread id, the
#   child is started once, closed once by the eviction, refused once and reloaded by the
#   follow-up without a second ``thread/started``; and on the cell ids the model sees
#   (each child cell yields, so its output names its id): the reload does not reuse one.

TOOLS: list[tuple[str, Json]] = [
    ("spawn_agent", {"name": "worker", "task": "Initial child task"}),
    ("send_message", {"name": "worker", "text": "Unread note for later"}),
    ("followup_task", {"name": "worker", "text": "Continue the child task"}),
]
CHILD_CELL = "yield_control(); text('child cell')"


class ParentAndChild:
    """The seed's mounted responses: the parent calls the iteration's tool, then is done;
    the child (any other thread) runs one ``exec`` cell, then answers. (The seed reuses
    response ids across its HTTP responses; on one WebSocket a reused id is a leftover
    frame of a finished response, so each id here names its iteration.)"""

    def __init__(self) -> None:
        self.parent_id = ""
        self.tool = ""
        self.child_requests: list[Json] = []

    async def __call__(self, conn: FakeConnection, request: Json) -> None:
        body = json.dumps(request["input"])
        tool, args = next((name, args) for name, args in TOOLS if name == self.tool)
        if request["client_metadata"]["session_id"] == self.parent_id:
            call_id = f"idle-eviction-{tool}"
            if call_id in body:
                await conn.send(frames.completed(f"parent-done-{tool}", []))
            else:
                call = frames.function_call(call_id, tool, json.dumps(args), namespace="collaboration")
                await conn.send(frames.output_item_done(0, call))
                await conn.send(frames.completed(f"parent-call-{tool}", [call]))
            return
        self.child_requests.append(request)
        exec_call = f"child-exec-{tool}"
        if exec_call not in body:
            call = frames.custom_tool_call(exec_call, "exec", CHILD_CELL)
            await conn.send(frames.output_item_done(0, call))
            await conn.send(frames.completed(f"child-exec-{tool}", [call]))
        else:
            # The seed's ev_assistant_message: the item exactly as the seed's server sends it.
            answer = ev_assistant_message(f"child-result-{tool}", "Remember the initial child result")
            await conn.send(answer)
            await conn.send(frames.completed(f"child-done-{tool}", [answer["item"]]))


def hold_rollout_lock(path: str) -> int:
    """What another live writer of the thread holds (the rollout's advisory lock)."""
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


async def test_v2_child_idle_eviction_preserves_mail_and_followup_context(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    model = ParentAndChild()
    async with app_server(tmp_path, model, unload_delay=0, multi_agent=True) as harness:  # thread_unload_delay_secs = 0
        client = await harness.client()
        model.parent_id = parent_id = (await start_thread(client))["id"]
        child_id: str | None = None
        for tool, _ in TOOLS:
            model.tool = tool
            with trio.fail_after(TIMEOUT):
                await run_turn(client, parent_id, f"Run {tool}")
            if tool != "send_message":
                with trio.fail_after(TIMEOUT):
                    completed = await client.read_notification("turn/completed", lambda p: p["threadId"] != parent_id)
                assert child_id in (None, completed["threadId"])
                child_id = completed["threadId"]
                continue
            # Mail is queued while subscribed. Unsubscribe lets the child be evicted; the
            # parent stays loaded so the follow-up uses the same agent tree.
            assert child_id is not None
            assert await client.request("thread/unsubscribe", {"threadId": child_id}) == {"status": "unsubscribed"}
            with trio.fail_after(TIMEOUT):
                assert await client.read_notification("thread/closed") == {"threadId": child_id}
            path = (await client.request("thread/read", {"threadId": child_id}))["thread"]["path"]
            lock = hold_rollout_lock(path)
            try:
                asked = await client.send_request("thread/resume", {"threadId": child_id})
                with trio.fail_after(TIMEOUT):
                    error = await client.read_error(asked)
            finally:
                os.close(lock)
            assert error.code == -32600
            assert "cannot resume an unloaded multi-agent v2 sub-agent" in error.message, error.message
            assert "locked by another live writer" in error.message
            loaded = await client.request("thread/loaded/list", {})
            assert loaded["data"] == [parent_id]
            assert len(model.child_requests) == 2, "queue-only mail must not start another child turn"
        seen = client.take_pending()

    assert child_id is not None
    child_requests = model.child_requests
    assert len(child_requests) == 4
    assert all(r["client_metadata"]["session_id"] == child_id for r in child_requests)
    resumed = child_requests[2]["input"]  # the reloaded child's first request: a full replay
    assistant = [item for item in resumed if item.get("type") == "message" and item.get("role") == "assistant"]
    # The assistant message keeps the id the server gave it (``child-result-spawn_agent``)
    # through the eviction and the reload: the seed's item, field for field.
    assert assistant == [{
        "id": "child-result-spawn_agent", "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": "Remember the initial child result"}],
    }]
    for message in ("Unread note for later", "Continue the child task"):
        carrying = [item for item in resumed if item.get("type") == "agent_message" and message in json.dumps(item)]
        assert len(carrying) == 1, f"resumed child must receive {message} exactly once"
        assert carrying[0]["author"] == "/root" and carrying[0]["recipient"] == "/root/worker"
    # Reloading the child replaces its code-mode host, but must not reuse cell ids.
    cells = [json.dumps(item["output"]) for request in child_requests for item in request["input"]
             if item.get("type") == "custom_tool_call_output"]
    assert "cell ID 1" in cells[0] and "cell ID 2" in cells[-1]
    # The child's life on the wire: started once, closed once (the eviction), reloaded by the
    # follow-up without a second thread/started; both of its turns under its one thread id.
    (started,) = [m["params"]["thread"] for m in seen
                  if m.get("method") == "thread/started" and m["params"]["thread"]["id"] == child_id]
    assert started["parentThreadId"] == parent_id and started["agentNickname"] == "worker"
    assert started["source"] == {"subAgent": {"thread_spawn": {
        "parent_thread_id": parent_id, "depth": 1, "agent_path": "/root/worker", "agent_nickname": "worker",
        "agent_role": None}}}
    closed = [m for m in seen if m.get("method") == "thread/closed"]
    assert closed == []  # the one thread/closed (the eviction) was read above
