"""Hostile cases of the public dialect (``Profile.GENERIC``, issue 25): what a third-party
server or the model behind it can send -- ``exec`` or a group tool called as a function
with any arguments, a server that refuses field after field, a fallback that finds no
HTTPS endpoint either, frames with no type -- is data: a failed tool output or one
``TurnFailed``, never an exception out of ``open_agent``, and each turn ends once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta
from tests.conftest import EventLog, scripted
from trio_agent.testing import FakeResponsesServer
from trio_agent.testing import _frames as frames


def generic(server: FakeResponsesServer, workspace: Path, **responses: Any) -> ta.AgentConfig:
    responses.setdefault("transport", ta.Transport.HTTPS)
    return ta.AgentConfig(auth="sk-test", workspace=workspace, thinking=ta.Thinking.LOW,
                          responses=ta.Responses(api_base_url=server.http_base_url, **responses))


def terminal(log: EventLog) -> list[str]:
    return [kind for kind in log.kinds() if kind in ("run.completed", "run.failed", "run.cancelled")]


@pytest.mark.parametrize(("name", "arguments", "says"), [
    ("exec", "not json {", "SyntaxError"),  # undecodable: run as the source it is, and fail there
    ("exec", "[]", '{"code": "<JavaScript source>"}'),
    ("exec", "null", '{"code": "<JavaScript source>"}'),
    ("exec", json.dumps({"code": 5}), '{"code": "<JavaScript source>"}'),
    ("exec", json.dumps({"code": "text(1)", "more": True}), '{"code": "<JavaScript source>"}'),
    ("clock__sleep", "{}", "unsupported call: clock__sleep"),  # no clock group here
    ("__", "{}", "unsupported call: __"),
    ("wait", json.dumps({"cell_id": "999"}), "999"),
])
async def test_a_hostile_function_call_is_a_failed_output_and_the_turn_goes_on(
    server: FakeResponsesServer, workspace: Path, name: str, arguments: str, says: str
) -> None:
    log = EventLog()
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        for reply in ([frames.function_call("call-1", name, arguments)], [frames.assistant_message("recovered")]):
            request = await server.accept_http()
            bodies.append(request.body)
            await request.send_sse([frames.completed(f"resp-{len(bodies)}", reply)])

    async with scripted(script) as nursery, ta.open_agent(generic(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("go")).result()).final_message == "recovered"
    [output] = [item for item in bodies[1]["input"] if item.get("type") == "function_call_output"]
    text = output["output"] if isinstance(output["output"], str) else json.dumps(output["output"])
    assert says in text
    [result] = log.payloads("tool.result")
    assert result["status"] == "failed"
    assert terminal(log) == ["run.completed"]


async def test_a_server_that_refuses_every_field_is_bounded(server: FakeResponsesServer, workspace: Path) -> None:
    """Each named field is dropped once; when a 400 names nothing new, the turn fails."""
    requests = 0
    refusal = '{"error": {"message": "Unknown parameters: include, reasoning, parallel_tool_calls, tool_choice"}}'

    async def script() -> None:
        nonlocal requests
        for _ in range(2):
            request = await server.accept_http()
            requests += 1
            await request.respond(400, refusal)

    async with scripted(script), ta.open_agent(generic(server, workspace, max_attempts=1)) as agent:
        with pytest.raises(ta.TurnFailed, match="Unknown parameters"):
            await (await agent.prompt("go")).result()
    assert requests == 2  # the first, then one without all four


async def test_a_fallback_that_finds_no_https_endpoint_either_fails_the_turn_once(
    server: FakeResponsesServer, workspace: Path
) -> None:
    log = EventLog()

    async def script() -> None:
        await (await server.accept_raw()).reject(404, "no")
        await (await server.accept_http()).respond(404, '{"detail": "Not Found"}')

    config = ta.AgentConfig(auth="sk-test", workspace=workspace,
                            responses=ta.Responses(api_base_url=server.http_base_url, max_attempts=1))
    async with scripted(script) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        with pytest.raises(ta.TurnFailed) as info:
            await (await agent.prompt("go")).result()
    assert "HTTP 404" in str(info.value.responses_error)
    assert terminal(log) == ["run.failed"]
    assert [p["code"] for p in log.payloads("api.warning")] == ["transport_fallback"]


@pytest.mark.parametrize("frame", [
    {"error": "a string, not an object"},
    {"no": "type at all"},
    {"error": {"code": 404}},  # no message: not a "not found" the agent can act on
])
async def test_a_frame_without_a_type_fails_the_turn_once(
    server: FakeResponsesServer, workspace: Path, frame: dict[str, Any]
) -> None:
    log = EventLog()

    async def script() -> None:
        await (await server.accept_http()).send_sse([frame])

    async with scripted(script) as nursery, ta.open_agent(generic(server, workspace, max_attempts=1)) as agent:
        nursery.start_soon(log.consume, agent.events)
        with pytest.raises(ta.TurnFailed):
            await (await agent.prompt("go")).result()
    assert terminal(log) == ["run.failed"]
