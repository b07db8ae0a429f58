"""Over HTTPS a completed response is never thrown away (issue 7, bug 4).

Once the terminal frame produced the outcome the response is paid for: a steer that
arrives while the rest of the body is drained no longer preempts it, and a transport
error during that drain does not replay the request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, scripted

CALL = frames.function_call("call-1", "add", json.dumps({"a": 2, "b": 3}), item_id="item-call")


def https_config(server: FakeResponsesServer, workspace: Path, tools: ta.Tools) -> ta.AgentConfig:
    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, api_base_url=server.http_base_url)
    return ta.AgentConfig(auth="test-key", workspace=workspace, responses=responses, tools=tools,
                          session_id="model-test", thinking=ta.Thinking.LOW)


def adding_tools(calls: list[dict[str, Any]]) -> ta.Tools:
    async def add(ctx: ta.ToolContext, args: Any) -> str:
        calls.append(args)
        return str(args["a"] + args["b"])

    return ta.Tools.default().function("add", "Add numbers.", {"type": "object"}, add)


async def test_a_steer_during_the_drain_keeps_the_completed_response(
    server: FakeResponsesServer, workspace: Path
) -> None:
    calls: list[dict[str, Any]] = []
    drained, steered = trio.Event(), trio.Event()
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        first = await server.accept_http()
        bodies.append(first.body)
        await first.start_stream()
        # The tool call is only in response.completed.output, as the API may send it.
        await first.send_event(frames.completed("resp-1", [CALL], usage_block=frames.usage(50)))
        drained.set()
        await steered.wait()
        await first.finish()
        second = await server.accept_http()
        bodies.append(second.body)
        await second.send_final("resp-2", "it is 5")

    log = EventLog()
    config = https_config(server, workspace, adding_tools(calls))
    async with scripted(script) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("add 2 and 3")
        await drained.wait()
        await trio.testing.wait_all_tasks_blocked()  # the client is reading the rest of the body
        await turn.steer("and say it briefly", interrupt=True)
        steered.set()
        assert (await turn.result()).final_message == "it is 5"
    assert calls == [{"a": 2, "b": 3}]  # the call in the completed output ran, once
    follow_up = bodies[1]
    assert follow_up["previous_response_id"] == "resp-1"  # chained on the kept response
    assert [item["type"] for item in follow_up["input"]] == ["function_call_output", "message"]
    assert follow_up["input"][0]["output"] == "5"
    assert follow_up["input"][1]["content"][0]["text"] == "and say it briefly"
    first_call = log.payloads("model.call.completed")[0]
    assert (first_call["response_id"], first_call["status"], first_call["tool_calls"]) == ("resp-1", "completed", 1)
    (completed,) = log.payloads("run.completed")
    assert completed["usage"]["total_tokens"] == 50 + 12


async def test_a_transport_error_during_the_drain_does_not_replay_a_paid_response(
    server: FakeResponsesServer, workspace: Path
) -> None:
    calls: list[dict[str, Any]] = []
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        first = await server.accept_http()
        bodies.append(first.body)
        await first.start_stream()
        await first.send_event(frames.completed("resp-1", [CALL]))
        await first.drop()  # the chunked body never ends properly
        second = await server.accept_http()
        bodies.append(second.body)
        await second.send_final("resp-2", "it is 5")

    log = EventLog()
    config = https_config(server, workspace, adding_tools(calls))
    async with scripted(script) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("add 2 and 3")).result()).final_message == "it is 5"
    assert calls == [{"a": 2, "b": 3}]
    assert len(bodies) == 2
    assert bodies[1]["previous_response_id"] == "resp-1"
    assert [item["type"] for item in bodies[1]["input"]] == ["function_call_output"]
    assert log.payloads("model.attempt.retrying") == []
    (completed,) = log.payloads("run.completed")
    assert (completed["response_attempts"], completed["response_retries"]) == (2, 0)


async def test_the_result_is_out_before_the_rest_of_the_response_is_read(
    server: FakeResponsesServer, workspace: Path
) -> None:
    # The rest of a completed response ([DONE], the end of the body) is read after the
    # turn's result is out, and before the next request.
    release = trio.Event()
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        first = await server.accept_http()
        await first.start_stream()
        await first.send_event(frames.completed("resp-1", [frames.assistant_message("first")]))
        await release.wait()  # set once the first result is out
        await first.send_event("[DONE]")
        await first.finish()
        second = await server.accept_http()
        bodies.append(second.body)
        await second.send_final("resp-2", "second")

    config = https_config(server, workspace, ta.Tools.default())
    async with scripted(script), ta.open_agent(config) as agent:
        assert (await (await agent.prompt("one")).result()).final_message == "first"
        release.set()
        assert (await (await agent.prompt("two")).result()).final_message == "second"
    assert bodies[0]["previous_response_id"] == "resp-1"
