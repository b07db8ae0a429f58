"""Servers other than OpenAI's (issue 25): the public dialect on the wire, the tool loop
with ``exec`` and user tools as function tools, the WebSocket -> HTTPS fallback, a
chained request whose response is gone (HTTP 400, in-stream 404), fields a server
refuses by name, and an answer that is not an event stream. Every test talks to the
fake server over loopback, as a third-party server would be reached."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from tests.conftest import EventLog, scripted
from trio_agent.testing import FakeHttpRequest, FakeResponsesServer
from trio_agent.testing import _frames as frames

PRIVATE_FIELDS = ("include", "reasoning", "prompt_cache_key", "client_metadata", "generate", "text")


@ta.tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def generic(server: FakeResponsesServer, workspace: Path, **kw: Any) -> ta.AgentConfig:
    """An agent pointed at the fake server's HTTP base URL, as at LiteLLM on loopback:
    nothing says which profile, so it is derived (GENERIC)."""
    responses = kw.pop("responses", None) or ta.Responses(api_base_url=server.http_base_url,
                                                          transport=ta.Transport.HTTPS)
    kw.setdefault("tools", ta.Tools.default().add(add))
    return ta.AgentConfig(auth="sk-test", workspace=workspace, responses=responses, session_id="profile-test", **kw)


def input_types(body: dict[str, Any]) -> list[str]:
    return [item.get("type", "") for item in body["input"]]


def output_of(body: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The output item answering ``call_id`` (without its client-assigned id)."""
    [item] = [item for item in body["input"] if item.get("call_id") == call_id and item["type"].endswith("_output")]
    return {key: value for key, value in item.items() if key != "id"}


async def test_a_generic_turn_sends_the_public_dialect_and_runs_the_tool_loop(
    server: FakeResponsesServer, workspace: Path
) -> None:
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        for reply in (
            [frames.function_call("call-add", "add", json.dumps({"a": 2, "b": 3}))],
            [frames.function_call("call-exec", "exec", json.dumps({"code": "text(6 * 7)"}))],
            [frames.assistant_message("5 and 42")],
        ):
            request = await server.accept_http()
            bodies.append(request.body)
            await request.send_sse([frames.completed(f"resp-{len(bodies)}", reply)])

    async with scripted(script), ta.open_agent(generic(server, workspace)) as agent:
        result = await (await agent.prompt("add 2 and 3, then run 6*7")).result()
    assert result.final_message == "5 and 42"
    assert len(bodies) == 3
    for body in bodies:  # the tools on every request, no private or OpenAI-only fields
        assert [tool["name"] for tool in body["tools"]] == ["exec", "wait", "add"]
        assert all(tool["type"] == "function" for tool in body["tools"])
        assert "additional_tools" not in input_types(body)
        assert body["store"] is False and "previous_response_id" not in body
        assert not [field for field in PRIVATE_FIELDS if field in body]
        assert body["instructions"] == bodies[0]["instructions"] and "msg_trio-agent-instructions" not in json.dumps(
            body["input"])  # top-level instructions: some bridges drop developer messages
    exec_tool = bodies[0]["tools"][0]
    assert exec_tool["parameters"]["required"] == ["code"]
    # the whole conversation every time: what came before, each call and its output
    assert input_types(bodies[2])[:len(bodies[0]["input"])] == input_types(bodies[0])
    assert output_of(bodies[1], "call-add") == {"type": "function_call_output", "call_id": "call-add", "output": "5"}
    exec_output = output_of(bodies[2], "call-exec")
    assert exec_output["type"] == "function_call_output" and "42" in json.dumps(exec_output["output"])
    assert input_types(bodies[2])[-4:] == [
        "function_call", "function_call_output", "function_call", "function_call_output"]


async def test_exec_called_with_the_wrong_arguments_is_a_failed_output_naming_the_form(
    server: FakeResponsesServer, workspace: Path
) -> None:
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        for reply in ([frames.function_call("call-1", "exec", json.dumps({"source": "text(1)"}))],
                      [frames.assistant_message("ok")]):
            request = await server.accept_http()
            bodies.append(request.body)
            await request.send_sse([frames.completed(f"resp-{len(bodies)}", reply)])

    async with scripted(script), ta.open_agent(generic(server, workspace)) as agent:
        assert (await (await agent.prompt("go")).result()).final_message == "ok"
    output = output_of(bodies[1], "call-1")["output"]
    assert '{"code": "<JavaScript source>"}' in output


async def test_asking_for_thinking_sends_reasoning_and_the_openai_profile_keeps_todays_wire(
    server: FakeResponsesServer, workspace: Path
) -> None:
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        for _ in range(2):
            request = await server.accept_http()
            bodies.append(request.body)
            await request.send_final(f"resp-{len(bodies)}", "hi")

    async with scripted(script):
        async with ta.open_agent(generic(server, workspace, thinking=ta.Thinking.HIGH)) as agent:
            await (await agent.prompt("think")).result()
        openai = ta.Responses(api_base_url=server.http_base_url, transport=ta.Transport.HTTPS,
                              profile=ta.Profile.OPENAI, store=False)
        async with ta.open_agent(generic(server, workspace, responses=openai)) as agent:
            await (await agent.prompt("hello")).result()
    asked, openai_body = bodies
    assert asked["reasoning"] == {"effort": "high"} and asked["include"] == ["reasoning.encrypted_content"]
    assert "tools" not in openai_body and input_types(openai_body)[0] == "additional_tools"
    assert openai_body["reasoning"] == {"effort": "medium", "context": "all_turns"}
    assert "client_metadata" in openai_body


async def test_the_default_transport_falls_back_to_https_once_with_a_notice(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """No transport and no WebSocket URL given: the derived ``ws://.../v1/responses`` is
    answered 404 (LiteLLM's way), the agent says so once and goes on over HTTPS, for
    this turn and the next, with no second handshake."""
    log = EventLog()
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        await (await server.accept_raw()).reject(404, '{"detail": "Not Found"}')
        for _ in range(2):
            request = await server.accept_http()
            assert (request.method, request.path) == ("POST", "/v1/responses")  # never a second handshake
            bodies.append(request.body)
            await request.send_final(f"resp-{len(bodies)}", "over https")

    responses = ta.Responses(api_base_url=server.http_base_url)
    async with scripted(script) as nursery, ta.open_agent(generic(server, workspace, responses=responses)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("one")).result()).final_message == "over https"
        assert (await (await agent.prompt("two")).result()).final_message == "over https"
    [notice] = [p for p in log.payloads("api.warning") if p["code"] == "transport_fallback"]
    assert notice["status"] == 404 and "using HTTPS" in str(notice["message"])
    assert "type" not in bodies[0]  # an HTTPS body, not a WebSocket frame
    assert input_types(bodies[1]) == [*input_types(bodies[0]), "message", "message"]  # + its answer, two


@pytest.mark.parametrize("status", [405, 426, 200, 400])
async def test_other_non_101_answers_fall_back_too(server: FakeResponsesServer, workspace: Path, status: int) -> None:
    async def script() -> None:
        await (await server.accept_raw()).reject(status, "no websockets here")
        await (await server.accept_http()).send_final("resp-1", "fine")

    responses = ta.Responses(api_base_url=server.http_base_url)
    async with scripted(script), ta.open_agent(generic(server, workspace, responses=responses)) as agent:
        assert (await (await agent.prompt("hi")).result()).final_message == "fine"


@pytest.mark.parametrize("status", [401, 429, 503])
async def test_credentials_limits_and_outages_never_fall_back(
    server: FakeResponsesServer, workspace: Path, status: int
) -> None:
    """A 401 (or a 429, a 503) would meet HTTPS too: the turn fails (or retries) as before."""
    async def script() -> None:
        for _ in range(2):  # the early connect, then the turn's one attempt
            await (await server.accept_raw()).reject(status, "{}")

    responses = ta.Responses(api_base_url=server.http_base_url, max_attempts=1)
    async with scripted(script), ta.open_agent(generic(server, workspace, responses=responses)) as agent:
        with pytest.raises(ta.TurnFailed) as info:
            await (await agent.prompt("hi")).result()
    assert f"HTTP {status}" in str(info.value.responses_error)


async def test_an_explicit_websocket_keeps_failing_with_a_hint(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        for _ in range(2):
            await (await server.accept_raw()).reject(404, "Not Found")

    responses = ta.Responses(api_base_url=server.http_base_url, transport=ta.Transport.WEBSOCKET, max_attempts=1)
    async with scripted(script), ta.open_agent(generic(server, workspace, responses=responses)) as agent:
        with pytest.raises(ta.TurnFailed) as info:
            await (await agent.prompt("hi")).result()
    message = str(info.value.responses_error)
    assert "HTTP 404" in message and "--transport https" in message


async def chain_lost(server: FakeResponsesServer, bodies: list[dict[str, Any]],
                     lose: Callable[[FakeHttpRequest], Awaitable[None]]) -> None:
    """Answer a first turn, ``lose`` the second turn's chained request, answer its replay."""
    for answer in (lambda request: request.send_final("resp-1", "first"), lose,
                   lambda request: request.send_final("resp-2", "second")):
        request = await server.accept_http()
        bodies.append(request.body)
        await answer(request)


async def test_a_stored_chain_that_is_gone_over_https_replays_once_in_full(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """Issue 25, item 2: HTTP 400 ``previous_response_not_found`` (OpenAI's answer over
    HTTPS) replays the turn's request in full, once, as the in-stream error does."""
    bodies: list[dict[str, Any]] = []
    gone = '{"error": {"message": "Previous response with id \'resp-1\' not found.", "type": "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}}'  # noqa: E501

    async def script() -> None:
        await chain_lost(server, bodies, lambda request: request.respond(400, gone))

    responses = ta.Responses(api_base_url=server.http_base_url, transport=ta.Transport.HTTPS,
                             profile=ta.Profile.OPENAI, store=True)
    async with scripted(script), ta.open_agent(generic(server, workspace, responses=responses)) as agent:
        await (await agent.prompt("one")).result()
        assert (await (await agent.prompt("two")).result()).final_message == "second"
    assert bodies[1]["previous_response_id"] == "resp-1"
    assert "previous_response_id" not in bodies[2]
    assert input_types(bodies[2]) == [*input_types(bodies[0]), "message", "message"]  # + its answer, two


async def test_llama_stacks_typeless_in_stream_not_found_replays_once_in_full(
    server: FakeResponsesServer, workspace: Path
) -> None:
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        await chain_lost(server, bodies, lambda request: request.send_sse(
            [{"error": {"code": "404", "message": "Response with id 'resp-1' not found."}}]))

    responses = ta.Responses(api_base_url=server.http_base_url, transport=ta.Transport.HTTPS, store=True)
    async with scripted(script), ta.open_agent(generic(server, workspace, responses=responses)) as agent:
        await (await agent.prompt("one")).result()
        assert (await (await agent.prompt("two")).result()).final_message == "second"
    assert bodies[1]["previous_response_id"] == "resp-1" and "tools" in bodies[1]  # tools on a chained request
    assert "previous_response_id" not in bodies[2]


async def test_a_field_the_server_refuses_by_name_is_left_out_once_and_for_good(
    server: FakeResponsesServer, workspace: Path
) -> None:
    log = EventLog()
    bodies: list[dict[str, Any]] = []
    refused = '{"error": {"message": "litellm.UnsupportedParamsError: custom_openai does not support parameters: [\'reasoning_effort\']"}}'  # noqa: E501

    async def script() -> None:
        request = await server.accept_http()
        bodies.append(request.body)
        await request.respond(400, refused)
        for _ in range(2):
            request = await server.accept_http()
            bodies.append(request.body)
            await request.send_final(f"resp-{len(bodies)}", "fine")

    config = generic(server, workspace, thinking=ta.Thinking.LOW, responses=ta.Responses(
        api_base_url=server.http_base_url, transport=ta.Transport.HTTPS, max_attempts=1))
    async with scripted(script) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("one")).result()).final_message == "fine"
        await (await agent.prompt("two")).result()
    assert "reasoning" in bodies[0] and "include" in bodies[0]
    assert "reasoning" not in bodies[1] and "reasoning" not in bodies[2]
    assert "include" in bodies[1]  # not named: kept
    [notice] = [p for p in log.payloads("api.warning") if p["code"] == "request_fields_dropped"]
    assert notice["fields"] == ["reasoning"]


async def test_a_400_naming_no_optional_field_fails_as_before(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        await (await server.accept_http()).respond(400, '{"error": {"message": "model \'x\' does not exist"}}')

    config = generic(server, workspace, responses=ta.Responses(
        api_base_url=server.http_base_url, transport=ta.Transport.HTTPS))
    async with scripted(script), ta.open_agent(config) as agent:
        with pytest.raises(ta.TurnFailed, match="does not exist"):
            await (await agent.prompt("hi")).result()


async def test_an_answer_that_is_not_an_event_stream_is_named_with_its_type_and_first_bytes(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """Issue 25, item 4: a server that ignores ``stream: true`` answers one JSON document."""
    async def script() -> None:
        await (await server.accept_http()).respond(200, '{"id": "resp_1", "object": "response", "output": []}')

    async with scripted(script), ta.open_agent(generic(server, workspace)) as agent:
        with pytest.raises(ta.TurnFailed) as info:
            await (await agent.prompt("hi")).result()
    message = str(info.value.responses_error)
    assert "application/json, not an event stream" in message and '"object": "response"' in message


async def test_a_mislabelled_event_stream_is_still_read(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        request = await server.accept_http()
        body = "data: " + json.dumps(frames.completed("resp-1", [frames.assistant_message("streamed")])) + "\n\n"
        await request.respond(200, body, [("content-type", "text/plain")])

    async with scripted(script), ta.open_agent(generic(server, workspace)) as agent:
        assert (await (await agent.prompt("hi")).result()).final_message == "streamed"


async def test_a_generic_websocket_agent_connects_early_but_sends_no_warmup(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """Over a WebSocket a generic server gets no ``generate: false`` request (OpenAI's own):
    the socket opens at start-up, the first body is the turn's, with its tools."""
    async def script() -> None:
        conn = await server.accept()
        with trio.fail_after(5):
            body = await conn.next_request()
        assert "generate" not in body and body["input"][-1]["content"][0]["text"] == "hi"
        assert [tool["name"] for tool in body["tools"]][:2] == ["exec", "wait"]
        await conn.send_completed("resp-1", [frames.assistant_message("ws")])

    responses = ta.Responses(websocket_url=server.url)
    async with scripted(script), ta.open_agent(generic(server, workspace, responses=responses)) as agent:
        assert (await (await agent.prompt("hi")).result()).final_message == "ws"
