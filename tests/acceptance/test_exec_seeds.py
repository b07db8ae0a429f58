"""Ports of the seeds whose model calls ``exec`` (nanocodex_model_tests.rs), over real loopback."""

from __future__ import annotations

import json
from pathlib import Path

import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import assert_warmup, events_of, make_config, run_model, scripted, warm


def _exec(call_id: str, source: str, item_id: str | None = None) -> dict:
    return frames.custom_tool_call(call_id, "exec", source, item_id=item_id)


async def test_queued_prompts_retain_the_thinking_captured_when_accepted(
    server: FakeResponsesServer, workspace: Path
) -> None:
    first_started = trio.Event()
    release_first = trio.Event()

    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        assert warmup["reasoning"]["effort"] == "low"
        await conn.send_warmup("resp-warmup")
        first = await conn.next_request()
        assert first["reasoning"]["effort"] == "low"
        first_started.set()
        await release_first.wait()
        await conn.send_completed("resp-first-tool", [_exec("call-exec", 'text("continued")')])
        continuation = await conn.next_request()
        assert continuation["previous_response_id"] == "resp-first-tool"
        assert continuation["reasoning"]["effort"] == "low"
        await conn.send_final("resp-first")
        queued = await conn.next_request()
        assert queued["previous_response_id"] == "resp-first"
        assert queued["reasoning"]["effort"] == "low"
        assert "service_tier" not in queued
        await conn.send_final("resp-queued")
        updated = await conn.next_request()
        assert updated["previous_response_id"] == "resp-queued"
        assert updated["reasoning"]["effort"] == "high"
        assert updated["service_tier"] == "priority"
        await conn.send_final("resp-updated")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            first = await agent.prompt("first prompt")
            await first_started.wait()
            queued = await agent.prompt("queued prompt")
            await agent.set_thinking(ta.Thinking.HIGH)
            await agent.set_fast_mode(True)
            release_first.set()
            await first.result()
            await queued.result()
            await (await agent.prompt("updated prompt")).result()


async def test_assistant_events_preserve_commentary_and_final_answer_phases(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        initial = await conn.next_request()
        assert initial["previous_response_id"] == "resp-warmup"
        commentary = await conn.send_assistant_output(0, "msg-commentary", "commentary", "I’ll verify.")
        await conn.send_completed(
            "resp-commentary", [commentary, _exec("call-exec", 'text("observed");', item_id="call-item")]
        )
        continuation = await conn.next_request()
        assert continuation["previous_response_id"] == "resp-commentary"
        final = await conn.send_assistant_output(0, "msg-final", "final_answer", "Done.")
        await conn.send_completed("resp-final", [final])

    out: list[ta.AgentEvent] = []
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:

            async def collect() -> None:
                async for event in agent.events:
                    out.append(event)

            nursery.start_soon(collect)
            result = await (await agent.prompt("check the live state")).result()
    assert result.final_message == "Done."
    expected = [
        {"model_call_index": 1, "item_id": "msg-commentary", "phase": "commentary", "text": "I’ll verify."},
        {"model_call_index": 2, "item_id": "msg-final", "phase": "final_answer", "text": "Done."},
    ]
    kinds = ta.EventKind
    assert [e.payload for e in out if e.kind is kinds.ASSISTANT_DELTA] == expected
    assert [e.payload for e in out if e.kind is kinds.ASSISTANT_MESSAGE] == expected
    timeline = [
        e.payload["phase"] if e.kind is kinds.ASSISTANT_MESSAGE else e.kind.value
        for e in out
        if e.kind in (kinds.ASSISTANT_MESSAGE, kinds.TOOL_CALL, kinds.TOOL_RESULT)
    ]
    assert timeline == ["commentary", "tool.call", "tool.result", "final_answer"]


async def test_continues_past_previous_model_call_limit(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        for call_index in range(1, 34):
            generation = await conn.next_request()
            previous = "resp-warmup" if call_index == 1 else f"resp-tool-{call_index - 1}"
            assert generation["previous_response_id"] == previous
            await conn.send_completed(
                f"resp-tool-{call_index}", [_exec(f"call-exec-{call_index}", 'text("continue")')]
            )
        final_generation = await conn.next_request()
        assert final_generation["previous_response_id"] == "resp-tool-33"
        await conn.send_final("resp-final")

    async with scripted(script, 30):
        output = await run_model(server, workspace, "continue until done")
    (completed,) = events_of(output, "run.completed")
    assert completed["model_calls"] == 34
    assert [p["call_index"] for p in events_of(output, "model.call.completed")] == list(range(1, 35))


async def test_reconnect_drops_previous_response_id_and_replays_full_history(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        first = await warm(server)
        generation = await first.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        await first.send_completed("resp-tool", [_exec("call-exec", 'text("continued")', item_id="server-item-id")])
        await first.close()
        second = await server.accept()
        replay = await second.next_request()
        assert "previous_response_id" not in replay
        assert replay["store"] is True
        items = replay["input"]
        assert len(items) == 7
        assert items[0]["type"] == "additional_tools"
        assert [items[i]["role"] for i in (1, 2, 3)] == ["developer", "developer", "user"]
        assert items[5]["type"] == "custom_tool_call"
        assert "id" not in items[5]
        assert items[6]["type"] == "custom_tool_call_output"
        assert items[6]["id"].startswith("ctco_")
        await second.send_final("resp-final")

    async with scripted(script):
        await run_model(server, workspace, "exercise reconnect")


async def test_receive_reset_reconnects_without_replaying_completed_tools(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        first = await warm(server)
        generation = await first.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        source = (
            'const result = await tools.exec_command({cmd: "printf x >> marker.txt"}); text(result.output);'
        )
        await first.send_completed("resp-tool", [_exec("call-exec", source, item_id="server-item-id")])
        continuation = await first.next_request()
        assert continuation["previous_response_id"] == "resp-tool"
        assert len(continuation["input"]) == 1
        tool_output = continuation["input"][0]
        await first.send({"type": "response.created", "response": {"id": "resp-interrupted"}})
        await first.send({"type": "response.in_progress", "response": {"id": "resp-interrupted"}})
        await first.send({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning"}})
        await first.drop()
        second = await server.accept()
        replay = await second.next_request()
        assert "previous_response_id" not in replay
        assert len(replay["input"]) == 7
        assert replay["input"][5]["type"] == "custom_tool_call"
        assert replay["input"][5]["call_id"] == "call-exec"
        assert replay["input"][6] == tool_output
        await second.send_final("resp-final")

    async with scripted(script):
        output = await run_model(server, workspace, "recover after a receive reset")
    assert (workspace / "marker.txt").read_text() == "x"
    (retrying,) = events_of(output, "model.attempt.retrying")
    assert (retrying["model_call_index"], retrying["error_class"]) == (2, "receive_transport")
    assert retrying["error"].startswith("failed to receive a Responses WebSocket frame")
    assert [p["purpose"] for p in events_of(output, "model.connection.started")] == ["initial", "reconnect"]
    assert [p["call_id"] for p in events_of(output, "tool.call")] == ["call-exec", "call-exec/code-1"]  # run once
    (completed,) = events_of(output, "run.completed")
    assert completed["status"] == "completed"
    assert completed["connection_attempts"] == 2
    assert completed["websocket_reconnects"] == 1
    assert completed["model_calls"] == 2
    assert events_of(output, "model.call.failed") == []


async def test_stored_response_local_code_mode_round_trip(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await server.accept()
        assert_warmup(await conn.next_request())
        await conn.send({"type": "response.metadata", "headers": {"x-codex-turn-state": "sticky-test"}})
        await conn.send_warmup("resp-warmup")
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        assert generation["store"] is True
        assert "generate" not in generation
        assert len(generation["input"]) == 3
        assert [item["role"] for item in generation["input"]] == ["developer", "user", "user"]
        assert generation["client_metadata"]["x-codex-turn-state"] == "sticky-test"
        source = 'const result = await tools.exec_command({cmd: "printf hello"}); text(result.output);'
        await conn.send_completed("resp-tool", [_exec("call-exec", source, item_id="item-exec")])
        continuation = await conn.next_request()
        assert continuation["previous_response_id"] == "resp-tool"
        assert len(continuation["input"]) == 1
        output_item = continuation["input"][0]
        assert output_item["type"] == "custom_tool_call_output"
        assert output_item["call_id"] == "call-exec"
        assert "success" not in output_item
        assert any("hello" in part.get("text", "") for part in output_item["output"])
        await conn.send_final("resp-final")

    async with scripted(script):
        output = await run_model(server, workspace, "run a shell command")
    calls = [(p["call_id"], p["tool"]) for p in events_of(output, "tool.call")]
    assert calls == [("call-exec", "exec"), ("call-exec/code-1", "exec_command")]


async def test_code_mode_notify_adds_a_named_exec_output_to_the_next_request(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        await conn.send_completed("resp-notify", [_exec("call-exec", 'notify({phase: "working"}); text("done");')])
        continuation = await conn.next_request()
        assert continuation["previous_response_id"] == "resp-notify"
        main, note = continuation["input"]
        assert main["type"] == "custom_tool_call_output"
        assert main["call_id"] == "call-exec"
        assert "name" not in main
        assert "done" in json.dumps(main)
        assert note["type"] == "custom_tool_call_output"
        assert note["call_id"] == "call-exec"
        assert note["name"] == "exec"
        assert note["output"] == '{"phase":"working"}'
        assert "success" not in note
        await conn.send_final("resp-final")

    async with scripted(script):
        await run_model(server, workspace, "send a progress notification")


async def test_prepares_images_and_stops_on_invalid_image_requests(
    server: FakeResponsesServer, workspace: Path
) -> None:
    png = (
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII="
    )

    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        await conn.send_completed("resp-image", [_exec("call-image", f'image("{png}", "original");')])
        continuation = await conn.next_request()
        output = continuation["input"][0]["output"]
        (image,) = [item for item in output if item["type"] == "input_image"]
        assert image["image_url"].startswith("data:image/png;base64,")
        assert "detail" not in image
        await conn.send({
            "type": "response.failed",
            "response": {
                "id": "resp-invalid-image",
                "status": "failed",
                "error": {
                    "code": "invalid_image",
                    "message": "The image data you provided does not represent a valid image",
                },
            },
        })

    failure: list[ta.TurnFailed] = []
    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            turn = await agent.prompt("inspect images")
            try:
                await turn.result()
            except ta.TurnFailed as exc:
                failure.append(exc)
    (error,) = failure
    assert isinstance(error.responses_error, ta.InvalidImageRequest)
    assert len(server.handshakes) == 1  # terminal: never retried on a new socket


async def test_yielded_exec_cell_continues_through_direct_wait_tool(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        source = (
            'text("before"); await yield_control(); '
            'const result = await tools.exec_command({cmd: "printf after", login: false}); text(result.output);'
        )
        await conn.send_completed("resp-exec", [_exec("call-exec", source)])
        yielded = await conn.next_request()
        assert yielded["previous_response_id"] == "resp-exec"
        assert yielded["input"][0]["type"] == "custom_tool_call_output"
        assert "Script running with cell ID 1" in json.dumps(yielded)
        await conn.send_completed("resp-wait", [
            frames.function_call("call-wait", "wait", '{"cell_id":"1","yield_time_ms":30000}')
        ])
        completed = await conn.next_request()
        assert completed["previous_response_id"] == "resp-wait"
        assert completed["input"][0]["type"] == "function_call_output"
        assert completed["input"][0]["call_id"] == "call-wait"
        assert "after" in json.dumps(completed)
        await conn.send_final("resp-final")

    async with scripted(script):
        output = await run_model(server, workspace, "yield and wait")
    calls = {call["call_id"]: call for call in events_of(output, "tool.call")}
    # The cell's nested call races the wait call (it resumes during model call 2): no order.
    assert {call_id: call["tool"] for call_id, call in calls.items()} == {
        "call-exec": "exec", "call-exec/code-1": "exec_command", "call-wait": "wait",
    }
    assert len(events_of(output, "tool.call")) == 3
    assert calls["call-exec/code-1"]["model_call_index"] == 1
    assert calls["call-wait"]["model_call_index"] == 2
