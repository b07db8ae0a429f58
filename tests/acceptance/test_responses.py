"""Ports of response-handling seeds: end_turn, null usage, phases, turn state, unsupported tools."""

from __future__ import annotations

from pathlib import Path

from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import assert_warmup, events_of, run_model, scripted, warm


async def test_explicit_end_turn_false_continues_without_a_tool_call(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        await conn.send(frames.completed(
            "resp-continue", [frames.assistant_message("intermediate")], end_turn=False
        ))
        continuation = await conn.next_request()
        assert continuation["previous_response_id"] == "resp-continue"
        assert continuation["input"] == []
        await conn.send_final("resp-final")

    async with scripted(script):
        output = await run_model(server, workspace, "continue when requested")
    (completed,) = events_of(output, "run.completed")
    assert completed["model_calls"] == 2
    assert completed["last_response_id"] == "resp-final"
    # The seed's `"text":"done"`: the final answer, in the last inbound frame.
    final = [p["event"] for p in events_of(output, "api.event") if p["direction"] == "inbound"][-1]
    assert final["response"]["output"][0]["content"][0]["text"] == "done"


async def test_completed_response_accepts_null_usage(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        await conn.send(frames.completed("resp-final", [frames.assistant_message("done")], usage_block=None))

    async with scripted(script):
        output = await run_model(server, workspace, "accept missing usage")
    (call,) = events_of(output, "model.call.completed")
    assert call["usage"] is None
    (completed,) = events_of(output, "run.completed")
    assert completed["status"] == "completed"
    assert completed["usage"] == {
        "input_tokens": 0, "cached_input_tokens": 0, "cache_write_input_tokens": 0,
        "output_tokens": 0, "reasoning_output_tokens": 0, "total_tokens": 0,
    }


async def test_completed_response_accepts_null_usage_details(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        usage = frames.usage()
        usage["input_tokens_details"] = None
        usage["output_tokens_details"] = None
        await conn.send(frames.completed("resp-final", [frames.assistant_message("done")], usage_block=usage))

    async with scripted(script):
        output = await run_model(server, workspace, "accept missing usage details")
    (call,) = events_of(output, "model.call.completed")
    assert call["usage"] == {
        "input_tokens": 10, "input_tokens_details": None, "output_tokens": 2, "output_tokens_details": None,
        "total_tokens": 12,
    }
    (completed,) = events_of(output, "run.completed")
    assert completed["status"] == "completed"
    assert completed["usage"] == {
        "input_tokens": 10, "cached_input_tokens": 0, "cache_write_input_tokens": 0,
        "output_tokens": 2, "reasoning_output_tokens": 0, "total_tokens": 12,
    }


async def test_unsupported_direct_tools_return_failed_results_to_the_model(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        await conn.send(frames.completed("resp-unsupported", [
            frames.custom_tool_call("call-custom", "missing_custom", "raw input"),
            frames.function_call("call-function", "missing_function", "not json", namespace="example::"),
        ]))
        continuation = await conn.next_request()
        assert continuation["previous_response_id"] == "resp-unsupported"
        first, second = continuation["input"]
        assert first["type"] == "custom_tool_call_output"
        assert first["call_id"] == "call-custom"
        assert first["output"] == "unsupported custom tool call: missing_custom"
        assert first["id"].startswith("ctco_")
        assert second["type"] == "function_call_output"
        assert second["call_id"] == "call-function"
        assert second["output"] == "unsupported call: example::missing_function"
        assert second["id"].startswith("fco_")
        await conn.send_final("resp-final")

    async with scripted(script):
        output = await run_model(server, workspace, "recover from unsupported tools")
    assert [(p["call_id"], p["status"], p["result"]) for p in events_of(output, "tool.result")] == [
        ("call-custom", "failed", "unsupported custom tool call: missing_custom"),
        ("call-function", "failed", "unsupported call: example::missing_function"),
    ]
    assert [p["status"] for p in events_of(output, "model.call.completed")] == ["completed", "completed"]
    (completed,) = events_of(output, "run.completed")
    assert completed["status"] == "completed"
    assert completed["tool_calls"] == 2
    assert events_of(output, "run.failed") == []


async def test_turn_state_from_metadata_is_echoed_in_client_metadata(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """The turn-state part of ``stored_response_local_code_mode_round_trip``."""

    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        assert_warmup(warmup)
        assert "x-codex-turn-state" not in warmup["client_metadata"]
        await conn.send({"type": "response.metadata", "headers": {"x-codex-turn-state": "sticky-test"}})
        await conn.send_warmup("resp-warmup")
        generation = await conn.next_request()
        assert generation["previous_response_id"] == "resp-warmup"
        assert generation["store"] is True
        assert "generate" not in generation
        assert len(generation["input"]) == 3
        assert [item["role"] for item in generation["input"]] == ["developer", "user", "user"]
        assert generation["client_metadata"]["x-codex-turn-state"] == "sticky-test"
        await conn.send_final("resp-final")

    async with scripted(script):
        await run_model(server, workspace, "run a shell command")


async def test_assistant_events_keep_commentary_and_final_answer_phases_without_tools(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        commentary = await conn.send_assistant_output(0, "msg-commentary", "commentary", "I’ll verify.")
        final = await conn.send_assistant_output(1, "msg-final", "final_answer", "Done.")
        await conn.send(frames.completed("resp-final", [commentary, final]))

    async with scripted(script):
        output = await run_model(server, workspace, "phases")
    expected = [
        {"model_call_index": 1, "item_id": "msg-commentary", "phase": "commentary", "text": "I’ll verify."},
        {"model_call_index": 1, "item_id": "msg-final", "phase": "final_answer", "text": "Done."},
    ]
    assert events_of(output, "assistant.delta") == expected
    assert events_of(output, "assistant.message") == expected
