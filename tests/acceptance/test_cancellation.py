"""Cancellation ports (nanocodex) and cancellation at exact points (MockClock, real loopback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

from .._os_facts import processes_in, wait_for_os_fact, wait_gone, wait_no_processes_in
from ..conftest import EventLog, make_config, scripted, warm

# These tests read processes' pids with `$$`, which are host pids only outside a sandbox's
# PID namespace: they pin the unsandboxed (subreaper) path; tests/acceptance/test_sandbox_lifetime.py
# covers the sandboxed one.
HOST_PIDS = ta.SandboxMode.DANGER_FULL_ACCESS


def assert_interrupted_replay(request: dict[str, Any]) -> None:
    assert "previous_response_id" not in request
    items = request["input"]
    assert len(items) == 9
    assert items[0]["type"] == "additional_tools"
    assert [items[i]["role"] for i in (1, 2, 3)] == ["developer", "developer", "user"]
    assert items[4]["content"][0]["text"] == "first prompt"
    assert items[5]["content"][0]["text"] == "done"
    assert items[6]["content"][0]["text"] == "cancel me"
    assert "<turn_aborted>" in items[7]["content"][0]["text"]
    assert items[8]["content"][0]["text"] == "run after cancellations"
    assert "partial text that must not enter history" not in json.dumps(request)


async def test_cancellation_retains_interrupted_prompt_and_resumes_from_the_abort_boundary(
    server: FakeResponsesServer, workspace: Path
) -> None:
    second_seen = trio.Event()

    async def script() -> None:
        first_socket = await warm(server)
        first = await first_socket.next_request()
        assert first["previous_response_id"] == "resp-warmup"
        await first_socket.send_final("resp-first")
        cancelled = await first_socket.next_request()
        assert cancelled["previous_response_id"] == "resp-first"
        assert cancelled["input"][0]["content"][0]["text"] == "cancel me"
        second_seen.set()
        partial = "partial text that must not enter history"
        await first_socket.send({"type": "response.output_text.delta", "delta": partial})
        replacement = await server.accept()
        assert_interrupted_replay(await replacement.next_request())
        await replacement.send_final("resp-follow-up")

    log = EventLog()
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            first = await agent.prompt(ta.Prompt("first prompt"))
            assert (await first.result()).final_message == "done"
            cancelled = await agent.prompt("cancel me")
            await second_seen.wait()
            queued = await agent.prompt("cancel before running")
            queued_control = queued.control()
            follow_up = await agent.prompt("run after cancellations")
            with pytest.raises(ta.TurnNotSteerable):
                await queued.steer("wrong target")
            await queued.cancel()
            with pytest.raises(ta.TurnNotCancellable):
                await queued_control.cancel()
            cancellation = cancelled.control()
            await cancellation.cancel()
            with pytest.raises(ta.TurnCancelled):
                await cancelled.result()
            with pytest.raises(ta.TurnCancelled):
                await queued.result()
            with pytest.raises(ta.TurnNotCancellable):
                await cancellation.cancel()
            assert (await follow_up.result()).final_message == "done"
    # Exactly one terminal event per turn, with its kind and status. The two cancelled
    # turns' relative order is left open: SPEC sec. 4 has a queued turn's terminal event
    # out before its cancel() returns, i.e. before the live turn's.
    terminal = [(e.turn_id, e.kind.value, e.payload["status"]) for e in log.events if e.kind.is_terminal]
    assert [status for _, _, status in terminal] == ["completed", "cancelled", "cancelled", "completed"]
    assert terminal[0] == (first.turn_id, "run.completed", "completed")
    assert sorted(terminal[1:3]) == sorted([
        (cancelled.turn_id, "run.failed", "cancelled"),
        (queued.turn_id, "run.failed", "cancelled"),
    ])
    assert terminal[3] == (follow_up.turn_id, "run.completed", "completed")


async def test_cancellation_pairs_an_active_tool_call_before_resuming(
    server: FakeResponsesServer, workspace: Path
) -> None:
    source = (
        'const result = await tools.exec_command({cmd: "printf started > tool-started; sleep 30"}); '
        "text(result.output);"
    )

    async def script() -> None:
        first = await warm(server)
        generation = await first.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        await first.send_completed("resp-tool", [frames.custom_tool_call("call-exec", "exec", source)])
        replacement = await server.accept()
        resumed = await replacement.next_request()
        assert "previous_response_id" not in resumed
        items = resumed["input"]
        assert len(items) == 9
        assert items[4]["content"][0]["text"] == "run a long tool"
        assert items[5]["type"] == "custom_tool_call" and items[5]["call_id"] == "call-exec"
        assert items[6]["type"] == "custom_tool_call_output" and items[6]["call_id"] == "call-exec"
        assert "aborted by user" in json.dumps(items[6])
        assert "<turn_aborted>" in items[7]["content"][0]["text"]
        assert items[8]["content"][0]["text"] == "continue"
        await replacement.send_final("resp-follow-up")

    log = EventLog()
    async with scripted(script, 15) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            interrupted = await agent.prompt("run a long tool")
            await log.wait_for(lambda e: e.kind is ta.EventKind.TOOL_CALL)
            await wait_for_os_fact((workspace / "tool-started").exists, "the tool starting")
            assert processes_in(workspace)  # the shell and its sleep are running
            await interrupted.cancel()
            with pytest.raises(ta.TurnCancelled):
                await interrupted.result()
            await wait_no_processes_in(workspace)  # no orphan of the command tree
            assert (await (await agent.prompt("continue")).result()).final_message == "done"
    cancelled = [
        p for p in log.payloads("tool.result")
        if p["call_id"] == "call-exec" and p["status"] == "cancelled" and "aborted by user" in json.dumps(p)
    ]
    assert len(cancelled) == 1
    # Exactly one terminal event per turn.
    assert [e.payload["status"] for e in log.events if e.kind.is_terminal] == ["cancelled", "completed"]


async def test_cancelling_the_scope_around_open_agent_mid_tool_ends_everything(
    server: FakeResponsesServer, workspace: Path
) -> None:
    pid_file = workspace / "pid"
    source = f"await tools.exec_command({{cmd: 'echo $$ > {pid_file}; exec sleep 300', login: false}});"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-tool", [frames.custom_tool_call("call-exec", "exec", source)])

    events: list[ta.AgentEvent] = []
    async with scripted(script, 15) as nursery:
        with trio.CancelScope() as scope:
            async with ta.open_agent(make_config(server, workspace, sandbox=HOST_PIDS)) as agent:
                stream = agent.events
                turn = await agent.prompt("run forever")
                await wait_for_os_fact(pid_file.exists, "the command starting")
                cancelled_at = trio.current_time()
                scope.cancel()
                await turn.result()  # cancelled: the block unwinds from here
        elapsed = trio.current_time() - cancelled_at
        async for event in stream:
            events.append(event)
        nursery.cancel_scope.cancel()
    assert scope.cancelled_caught
    assert elapsed < 3.0  # TERM, then KILL after a short grace: bounded, not the 300 s sleep
    await wait_gone([int(pid_file.read_text())])
    await wait_no_processes_in(workspace)
    terminal = [e for e in events if e.kind.is_terminal]
    assert [e.payload["status"] for e in terminal] == ["cancelled"]
    assert "cancel" in terminal[0].payload["reason"]
    assert not [e for e in events if e.kind is ta.EventKind.RUN_ERROR]  # a cancellation is not an error
    assert terminal[0] is events[-1]
    with pytest.raises(ta.TurnCancelled):
        await turn.result()


# -- cancellation at exact points -------------------------------------------------------


async def _script_until(conn: FakeConnection, point: str) -> None:
    """Bring the first generation to ``point``; the test cancels there."""
    if point == "before_response_id":
        return
    await conn.send(frames.response_created("resp-live"))
    message = frames.assistant_message("partial text that must not enter history", item_id="msg-live")
    if point == "mid_delta":
        await conn.send(frames.output_item_added(0, {**message, "content": []}))
        await conn.send(frames.text_delta(0, "partial text"))
    elif point == "between_item_and_completion":
        await conn.send(frames.output_item_done(0, message))
    elif point == "during_tool":
        await conn.send(frames.completed("resp-live", [frames.function_call("call-held", "held", "{}")]))
    elif point == "during_backoff":
        await conn.send(frames.error_frame("busy", code="server_is_overloaded", retry_after=30))


POINTS = ["during_warmup", "before_response_id", "mid_delta", "between_item_and_completion", "during_tool",
          "during_backoff"]


@pytest.mark.parametrize("point", POINTS)
async def test_cancel_at_exact_points_leaves_consistent_history(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock, point: str
) -> None:
    held_started = trio.Event()

    async def held(ctx: ta.ToolContext, args: Any) -> str:
        held_started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    tools = ta.Tools.default().function("held", "Never returns.", {"type": "object"}, held)
    at_point = trio.Event()
    replay: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        if point == "during_warmup":
            at_point.set()
        else:
            await conn.send_warmup("resp-warmup")
            await conn.next_request()
            await _script_until(conn, point)
            at_point.set()
        second = await server.accept()
        replay.append(await second.next_request())
        await second.send_final("resp-after")

    log = EventLog()
    async with scripted(script, 100) as nursery:
        async with ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("doomed")
            await at_point.wait()
            if point == "during_tool":
                await held_started.wait()
            elif point == "during_backoff":
                await log.wait_for(lambda e: e.kind is ta.EventKind.MODEL_ATTEMPT_RETRYING)
            else:
                await trio.testing.wait_all_tasks_blocked()
            await turn.cancel()
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
            assert (await (await agent.prompt("after")).result()).final_message == "done"
    (request,) = replay
    assert "previous_response_id" not in request
    texts = json.dumps(request)
    assert "partial text" not in texts
    items = request["input"]
    if point == "during_tool":
        prompt, call, output, aborted, after = items[-5:]
        assert call["call_id"] == output["call_id"] == "call-held"
        assert output["output"].endswith("aborted by user")
    else:
        prompt, aborted, after = items[-3:]
    assert prompt["content"][0]["text"] == "doomed"
    assert "<turn_aborted>" in aborted["content"][0]["text"]
    assert after["content"][0]["text"] == "after"
    terminal = [e.payload["status"] for e in log.events if e.kind.is_terminal]
    assert terminal == ["cancelled", "completed"]
    if point == "during_backoff":
        assert len([p for p in log.payloads("model.attempt.started") if p["phase"] == "generation"]) == 2
