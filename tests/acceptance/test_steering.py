"""Steering ports: nanocodex FIFO/tool-boundary seeds and codex interrupt/preempt seeds (WebSocket)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from .._os_facts import wait_for_os_fact
from ..conftest import EventLog, make_config, scripted, warm
from ._held_tool import held_tool, output_text


def user_texts(body: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for item in body["input"]
        if item.get("type") == "message" and item.get("role") == "user"
        for part in item["content"]
    ]


def reasoning_item(item_id: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": "thinking"}]}


def _is_call(event: ta.AgentEvent, call_id: str) -> bool:
    return event.kind is ta.EventKind.TOOL_CALL and event.payload["call_id"] == call_id


async def test_steering_is_bounded_fifo_and_joins_at_the_next_model_boundary(
    server: FakeResponsesServer, workspace: Path
) -> None:
    first_seen, release_first = trio.Event(), trio.Event()

    async def script() -> None:
        conn = await warm(server)
        first = await conn.next_request()
        assert first["previous_response_id"] == "resp-warmup"
        assert first["input"][2]["content"][0]["text"] == "initial task"
        first_seen.set()
        await release_first.wait()
        await conn.send_final("resp-first")
        steered = await conn.next_request()
        assert steered["previous_response_id"] == "resp-first"
        assert len(steered["input"]) == 8
        for index, item in enumerate(steered["input"]):
            assert item["role"] == "user"
            assert item["content"][0]["text"] == f"constraint {index}"
        await conn.send_final("resp-steered")

    log = EventLog()
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt(ta.Prompt("initial task"))
            await first_seen.wait()
            for index in range(8):
                await turn.steer(f"constraint {index}")
            with pytest.raises(ta.SteerQueueFull):
                await turn.steer("constraint 8")
            release_first.set()
            assert (await turn.result()).final_message == "done"
    steered = log.payloads("run.steered")
    assert [p["steer_index"] for p in steered] == list(range(1, 9))
    assert all(p["instruction_bytes"] == len("constraint 0") for p in steered)
    (terminal,) = log.payloads("run.completed")
    assert terminal["steers"] == 8


async def test_steering_during_a_tool_call_joins_after_the_tool_result(
    server: FakeResponsesServer, workspace: Path
) -> None:
    source = (
        'const result = await tools.exec_command({cmd: "printf started > tool-started; '
        'while [ ! -f release-tool ]; do sleep 0.01; done; printf shit"}); text(result.output);'
    )

    async def script() -> None:
        conn = await warm(server)
        initial = await conn.next_request()
        assert initial["previous_response_id"] == "resp-warmup"
        await conn.send_completed("resp-tool", [frames.custom_tool_call("call-exec", "exec", source)])
        steered = await conn.next_request()
        assert steered["previous_response_id"] == "resp-tool"
        tool_output, steer = steered["input"]
        assert tool_output["type"] == "custom_tool_call_output"
        assert tool_output["call_id"] == "call-exec"
        assert "shit" in json.dumps(tool_output)
        assert steer["role"] == "user"
        assert steer["content"][0]["text"] == "print shat instead"
        await conn.send_final("resp-steered")

    log = EventLog()
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("print shit a lot of times")
            await wait_for_os_fact((workspace / "tool-started").exists, "the tool starting")
            await turn.steer("print shat instead")
            assert not (workspace / "release-tool").exists()
            (workspace / "release-tool").write_bytes(b"")
            assert (await turn.result()).final_message == "done"
    assert log.payloads("run.steered") == [{"steer_index": 1, "instruction_bytes": len("print shat instead")}]


@pytest.mark.parametrize("discard_partial", [False, True], ids=["completed_reasoning", "discarded_reasoning"])
async def test_steer_interrupts_and_drains_websocket(
    server: FakeResponsesServer, workspace: Path, discard_partial: bool
) -> None:
    streaming = trio.Event()

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_all([frames.response_created("warm-1"), frames.completed("warm-1")])
        initial = await conn.next_request()
        assert initial["previous_response_id"] == "warm-1"
        await conn.send(frames.response_created("resp-interrupted"))
        await conn.send(frames.output_item_added(0, reasoning_item("reason-1")))
        streaming.set()
        interrupt = await conn.next_request()
        assert interrupt == {
            "type": "response.interrupt", "response_id": "resp-interrupted", "mode": "discard_partial_items"
        }
        await conn.send({"type": "response.interrupt.accepted", "response_id": "resp-interrupted"})
        if discard_partial:
            await conn.send({"type": "response.output_item.interrupted", "response_id": "resp-interrupted",
                             "item_id": "reason-1", "output_index": 0})
        else:
            await conn.send(frames.output_item_done(0, reasoning_item("reason-1")))
        interrupted = frames.completed("resp-interrupted", usage_block=frames.usage(42))
        interrupted["type"] = "response.incomplete"
        interrupted["response"]["status"] = "incomplete"
        interrupted["response"]["incomplete_details"] = {"reason": "interrupted"}
        del interrupted["response"]["output"]
        await conn.send(interrupted)
        follow_up = await conn.next_request()
        assert follow_up["previous_response_id"] == "resp-interrupted"
        assert [t for t in user_texts(follow_up) if t in ("first prompt", "second prompt")] == ["second prompt"]
        await conn.send_all([frames.response_created("resp-follow-up"), frames.completed("resp-follow-up",
                             [frames.assistant_message("done")])])

    log = EventLog()
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("first prompt")
            await streaming.wait()
            await turn.steer("second prompt", interrupt=True)
            assert (await turn.result()).final_message == "done"
    assert len(server.handshakes) == 1
    calls = log.payloads("model.call.completed")
    assert [c["status"] for c in calls] == ["incomplete", "completed"]
    assert calls[0]["usage"]["total_tokens"] == 42
    (terminal,) = log.payloads("run.completed")
    assert terminal["usage"]["total_tokens"] == 42 + 12
    assert terminal["steers"] == 1 and terminal["model_calls"] == 2


async def test_interrupt_before_the_response_id_is_known_is_sent_when_it_arrives(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """The steer is accepted before the response id exists; ``steer()`` returns only once
    the interrupt the connection side sent for it is on the wire."""
    request_seen = trio.Event()
    order: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        request_seen.set()
        await trio.testing.wait_all_tasks_blocked()  # the steer is waiting for the response id
        order.append("response.created")
        await conn.send(frames.response_created("resp-live"))
        interrupt = await conn.next_request()
        assert interrupt["type"] == "response.interrupt" and interrupt["response_id"] == "resp-live"
        order.append("interrupt received")
        await conn.send({"type": "response.incomplete", "response": {
            "id": "resp-live", "status": "incomplete", "incomplete_details": {"reason": "interrupted"}}})
        follow_up = await conn.next_request()
        assert follow_up["previous_response_id"] == "resp-live"
        assert len(follow_up["input"]) == 1
        assert user_texts(follow_up) == ["change course"]
        await conn.send_final("resp-2")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            turn = await agent.prompt("go")
            await request_seen.wait()
            await turn.steer("change course", interrupt=True)
            order.append("steer returned")
            await turn.result()
    assert sorted(order) == ["interrupt received", "response.created", "steer returned"]
    assert order[0] == "response.created"  # steer() was still waiting when the id arrived


async def test_unanswered_interrupt_drops_the_socket_and_replays_in_full(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        call = frames.custom_tool_call("call-1", "exec", 'text("ran once")')
        await conn.send_all([frames.response_created("resp-stuck"), frames.output_item_done(0, call)])
        interrupt = await conn.next_request()
        assert interrupt["type"] == "response.interrupt"
        # Never answer: the client gives up after its grace and reconnects.
        second = await server.accept()
        replay = await second.next_request()
        assert "previous_response_id" not in replay
        types = [item.get("type") for item in replay["input"]]
        assert types[-3:] == ["custom_tool_call", "custom_tool_call_output", "message"]
        assert "ran once" in json.dumps(replay["input"][-2])
        assert user_texts(replay)[-1] == "stop now"
        await second.send_final("resp-final")

    async with scripted(script, 100):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            turn = await agent.prompt("start")
            await trio.testing.wait_all_tasks_blocked()
            await turn.steer("stop now", interrupt=True)
            await turn.result()


@pytest.mark.parametrize("interrupt", [False, True], ids=["disabled", "enabled"])
async def test_steers_yield_exec_and_wait_without_stopping_the_cell(
    server: FakeResponsesServer, workspace: Path, interrupt: bool
) -> None:
    started, release = trio.Event(), trio.Event()
    source = "// @exec: {\"yield_time_ms\": 60000}\nawait tools.held_tool({}); text('background result');"
    final_request: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-exec", [frames.custom_tool_call("exec-call", "exec", source)])
        if interrupt:
            for response_id, call_id in (("resp-wait-one", "wait-one"), ("resp-wait-two", "wait-two")):
                body = await conn.next_request()
                exec_output = output_text(body, "custom_tool_call_output", "exec-call")
                assert exec_output is not None and exec_output.startswith("Script running with cell ID ")
                cell = exec_output.removeprefix("Script running with cell ID ").splitlines()[0]
                if call_id == "wait-two":
                    wait_one = output_text(body, "function_call_output", "wait-one") or ""
                    assert wait_one.startswith(f"Script running with cell ID {cell}")
                arguments = json.dumps({"cell_id": cell, "yield_time_ms": 60000})
                await conn.send_completed(response_id, [frames.function_call(call_id, "wait", arguments)])
        final_request.append(await conn.next_request())
        await conn.send_final("resp-done")

    log = EventLog()
    async with scripted(script, 20) as nursery:
        # The codex seed runs over HTTPS, where every request carries the whole
        # history; FULL_REPLAY gives the same request bodies on the WebSocket.
        responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, history=ta.History.FULL_REPLAY)
        config = make_config(server, workspace, responses=responses, tools=held_tool(started, release, []))
        async with ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("start the cell")
            await started.wait()
            await turn.steer("interrupt exec", interrupt=interrupt)
            if interrupt:
                await log.wait_for(lambda e: _is_call(e, "wait-one"))
                await turn.steer("interrupt wait", interrupt=True)
                await log.wait_for(lambda e: _is_call(e, "wait-two"))
            release.set()
            await turn.result()
    (request,) = final_request
    if not interrupt:
        assert "background result" in (output_text(request, "custom_tool_call_output", "exec-call") or "")
        assert "interrupt exec" in user_texts(request)
        return
    exec_output = output_text(request, "custom_tool_call_output", "exec-call") or ""
    cell = exec_output.removeprefix("Script running with cell ID ").splitlines()[0]
    wait_one = output_text(request, "function_call_output", "wait-one") or ""
    assert f"Script running with cell ID {cell}" in wait_one
    assert "background result" in (output_text(request, "function_call_output", "wait-two") or "")
    assert [t for t in user_texts(request) if t in ("start the cell", "interrupt exec", "interrupt wait")] == [
        "start the cell", "interrupt exec", "interrupt wait"
    ]


async def test_user_input_does_not_preempt_after_reasoning_item(
    server: FakeResponsesServer, workspace: Path
) -> None:
    reasoning_started, steered = trio.Event(), trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_all([
            frames.response_created("resp-1"), frames.output_item_added(0, reasoning_item("reason-1"))
        ])
        reasoning_started.set()
        await steered.wait()
        message = frames.assistant_message("first answer", item_id="msg-1")
        await conn.send_all([
            frames.output_item_done(0, reasoning_item("reason-1")),
            frames.output_item_done(1, frames.function_call(
                "call-preserved", "shell", '{"command":"echo preserved tool call"}')),
            frames.output_item_added(2, {**message, "content": []}),
            frames.text_delta(2, "first answer"),
            frames.output_item_done(2, message),
            frames.completed("resp-1"),
        ])
        second = await conn.next_request()
        assert second["previous_response_id"] == "resp-1"
        assert [item.get("type") for item in second["input"]] == ["function_call_output", "message"]
        assert second["input"][0]["call_id"] == "call-preserved"
        assert user_texts(second) == ["second prompt"]
        await conn.send_final("resp-2")

    log = EventLog()
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("first prompt")
            await reasoning_started.wait()
            await turn.steer("second prompt")
            steered.set()
            await turn.result()
    assert log.payloads("assistant.message") == [{"model_call_index": 1, "item_id": "msg-1", "text": "first answer"}]
    assert not [p for p in log.payloads("api.event") if p["event"].get("type") == "response.interrupt"]
    assert len(server.requests) == 3


async def test_steering_a_queued_or_finished_turn_is_refused(server: FakeResponsesServer, workspace: Path) -> None:
    release = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await release.wait()
        await conn.send_final("resp-1")
        await conn.next_request()
        await conn.send_final("resp-2")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            first = await agent.prompt("first")
            queued = await agent.prompt("queued")
            with pytest.raises(ta.TurnNotSteerable, match="queued"):
                await queued.steer("too early")
            with pytest.raises(ta.InvalidPrompt):
                await first.steer("   ")
            release.set()
            await first.result()
            with pytest.raises(ta.TurnNotSteerable, match="completed"):
                await first.steer("too late")
            await queued.result()


async def test_wait_running_then_steer_joins_the_turn(server: FakeResponsesServer, workspace: Path) -> None:
    release = trio.Event()
    answers: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        first = await conn.next_request()
        await release.wait()
        answers.append("listed")  # before sending: the turn may end as soon as it is out
        await conn.send_final("resp-1", "listed")
        if user_texts(first)[-1] != "and count them":  # the steer missed the first request
            follow = await conn.next_request()
            assert user_texts(follow) == ["and count them"]
            answers.append("counted")
            await conn.send_final("resp-2", "counted")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            turn = await agent.prompt("list the files")
            queued = await agent.prompt("queued behind it")
            assert await turn.wait_running()
            await turn.steer("and count them")
            await queued.cancel()
            assert not await queued.wait_running()  # cancelled while queued: it never ran
            release.set()
            assert (await turn.result()).final_message == answers[-1]
            assert await turn.wait_running()  # it did run
