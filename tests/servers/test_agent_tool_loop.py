"""trio_agent's tool loop, library-level, through each third-party server over HTTPS: the
tools reach the chat backend as function tools (a user tool with its schema, ``exec``
as ``{"code": string}``), the backend's tool call runs here, its output reaches the
backend in the next chat request as the tool message, and the backend's text answer is
the turn's result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta

from ._chat_backend import ChatBackend, call, say
from ._servers import API_KEY, MODEL, Server


@ta.tool
async def save_note(ctx: ta.ToolContext, title: str, body: str) -> str:
    """Save a note in the workspace.

    Args:
        title: The note's file name.
        body: What the note says.
    """
    (ctx.workspace / title).write_text(body)
    return f"saved {title} ({len(body)} characters)"


def _config(server: Server, workspace: Path, transport: ta.Transport | None = ta.Transport.HTTPS,
            **kw: Any) -> ta.AgentConfig:
    """``transport=None``: the default (a WebSocket that may fall back to HTTPS)."""
    return ta.AgentConfig(
        auth=API_KEY, model=MODEL, workspace=workspace,  # thinking left to its default: no reasoning asked for
        responses=ta.Responses(api_base_url=server.api_base, transport=transport),
        tools=ta.Tools.default().add(save_note), **kw,
    )


async def _run(config: ta.AgentConfig, *prompts: str) -> tuple[ta.TurnResult, list[ta.AgentEvent]]:
    """The prompts in turn on one agent: the last turn's result, and every event."""
    events: list[ta.AgentEvent] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery, ta.open_agent(config) as agent:

            async def collect() -> None:
                async for event in agent.events:
                    events.append(event)

            nursery.start_soon(collect)
            for prompt in prompts:
                result = await (await agent.prompt(prompt)).result()
    return result, events


def _tools_by_name(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tools = request.get("tools") or []
    assert all(tool["type"] == "function" for tool in tools), tools
    return {tool["function"]["name"]: tool["function"] for tool in tools}


def _text(content: Any) -> str:
    """A chat message's content as text (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def _tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in request["messages"] if message["role"] == "tool"]


def _called(request: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, name, arguments) of every tool call in the request's assistant messages."""
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for message in request["messages"] if message["role"] == "assistant"
            for c in message.get("tool_calls") or []]


def assert_offered_tools(request: dict[str, Any]) -> None:
    """``exec`` as a function of ``{code: string}`` and the user tool with its own schema."""
    offered = _tools_by_name(request)
    assert {"exec", "save_note"} <= offered.keys(), sorted(offered)
    code = offered["exec"]["parameters"]
    assert code["type"] == "object" and list(code["properties"]) == ["code"], code
    assert code["properties"]["code"]["type"] == "string", code
    assert code.get("required") == ["code"], code
    assert "### `save_note`" in offered["exec"]["description"]  # declared to JavaScript as tools.save_note
    note = offered["save_note"]
    assert note["description"].startswith("Save a note in the workspace.")
    assert note["parameters"]["properties"] == {
        "title": {"type": "string", "description": "The note's file name."},
        "body": {"type": "string", "description": "What the note says."},
    }, note["parameters"]
    assert sorted(note["parameters"]["required"]) == ["body", "title"]


async def test_a_user_tool_called_by_the_backend_runs_and_its_output_returns(
    responses_server: Server, backend: ChatBackend, tmp_path: Path
) -> None:
    backend.script(call("save_note", {"title": "note.txt", "body": "hello"}), say("The note is saved."))
    result, events = await _run(_config(responses_server, tmp_path), "Save a note saying hello.")

    first, second = backend.requests  # one chat request per model call: the call, then the answer
    assert_offered_tools(first)
    assert any("Save a note saying hello." in _text(m["content"]) for m in first["messages"] if m["role"] == "user")
    assert (tmp_path / "note.txt").read_text() == "hello"
    [(call_id, name, arguments)] = _called(second)
    assert (name, arguments) == ("save_note", {"title": "note.txt", "body": "hello"})
    [output] = _tool_messages(second)
    assert output["tool_call_id"] == call_id
    assert _text(output["content"]) == "saved note.txt (5 characters)"
    assert result.final_message == "The note is saved."
    results = [e.payload for e in events if e.kind is ta.EventKind.TOOL_RESULT]
    assert [(r["status"]) for r in results] == ["completed"], results


async def test_exec_runs_javascript_that_calls_a_user_tool(
    responses_server: Server, backend: ChatBackend, tmp_path: Path
) -> None:
    code = 'const said = await tools.save_note({title: "js.txt", body: "from exec"}); text("tool said: " + said);'
    backend.script(call("exec", {"code": code}), say("Saved it from JavaScript."))
    result, _ = await _run(_config(responses_server, tmp_path), "Save a note from JavaScript.")

    first, second = backend.requests
    assert_offered_tools(first)
    assert (tmp_path / "js.txt").read_text() == "from exec"
    [(call_id, name, arguments)] = _called(second)
    assert (name, arguments) == ("exec", {"code": code})
    [output] = _tool_messages(second)
    assert output["tool_call_id"] == call_id
    assert "tool said: saved js.txt (9 characters)" in _text(output["content"]), output
    assert result.final_message == "Saved it from JavaScript."


async def test_litellm_refuses_reasoning_for_a_chat_model_and_the_agent_drops_it_once(
    litellm: Server, backend: ChatBackend, tmp_path: Path
) -> None:
    """Thinking asked for: the request carries ``reasoning``, which LiteLLM's
    ``custom_openai`` provider refuses by name (400 ``UnsupportedParamsError ...
    ['reasoning_effort']``) before calling the backend; the agent leaves the field out
    from then on, says so once (``api.warning`` ``request_fields_dropped``), and the
    turn completes."""
    backend.script(say("Thought about it."))
    result, events = await _run(_config(litellm, tmp_path, thinking=ta.Thinking.HIGH), "Think, then answer.")

    assert result.final_message == "Thought about it."
    [request] = backend.requests  # the refused request never reached the backend
    assert "reasoning_effort" not in request and "reasoning" not in request
    sent: list[dict[str, Any]] = [
        dict(p["event"]) for p in (ta.payload_of(e, ta.EventKind.API_EVENT) for e in events)
        if p is not None and p["direction"] == "outbound"
    ]
    assert [("reasoning" in body) for body in sent] == [True, False]
    assert sent[0]["reasoning"] == {"effort": "high"}
    warnings = [p for p in (ta.payload_of(e, ta.EventKind.API_WARNING) for e in events) if p is not None]
    assert [w["code"] for w in warnings] == ["request_fields_dropped"], warnings
    assert "reasoning" in (warnings[0].get("fields") or []), warnings


# codex-bridge-python 0.1.5 turns the request's top-level ``instructions`` into a system
# message and then lets every developer or system *input* message replace ``messages[0]``.
# The agent's generic requests therefore carry the developer messages that open the
# conversation (the permissions) inside ``instructions`` (``_wire.portable``): before
# that, this bridge's backend got the permissions and never the instructions.
@pytest.mark.parametrize("name", ["litellm", "codex_bridge"])
async def test_the_instructions_are_the_backends_system_message(
    name: str, request: pytest.FixtureRequest, backend: ChatBackend, tmp_path: Path
) -> None:
    server: Server = request.getfixturevalue(name)
    backend.script(say("Noted."))
    instructions = "You keep notes for the user."
    result, _ = await _run(_config(server, tmp_path, instructions=instructions), "Take a note.")

    assert result.final_message == "Noted."
    [sent] = backend.requests
    systems = [_text(m["content"]) for m in sent["messages"] if m["role"] == "system"]
    shown = [(m["role"], _text(m["content"])[:60]) for m in sent["messages"]]
    assert [text for text in systems if text.startswith(instructions)], shown
    assert "<permissions instructions>" in "".join(systems), shown  # and the permissions with them


async def test_the_default_transport_falls_back_to_https_once_per_agent(
    codex_bridge: Server, backend: ChatBackend, tmp_path: Path
) -> None:
    """The bridge has no WebSocket (its handshake is a 404): the agent's first model call
    tries one, falls back to HTTPS with one ``api.warning`` (``transport_fallback``), and
    later turns go straight to HTTPS."""
    backend.script(call("save_note", {"title": "a.txt", "body": "one"}), say("First."), say("Second."))
    handshakes_before = codex_bridge.log_tail(10**9).count("unhandled GET /v1/responses")
    config = _config(codex_bridge, tmp_path, transport=None)
    result, events = await _run(config, "Save a.txt.", "And now?")

    assert result.final_message == "Second."
    assert (tmp_path / "a.txt").read_text() == "one"
    assert len(backend.requests) == 3
    warnings = [p for p in (ta.payload_of(e, ta.EventKind.API_WARNING) for e in events) if p is not None]
    assert [w["code"] for w in warnings] == ["transport_fallback"], warnings
    sent = [p for p in (ta.payload_of(e, ta.EventKind.API_EVENT) for e in events)
            if p is not None and p["direction"] == "outbound"]
    assert {p["transport"] for p in sent} == {"responses_https_sse"}
    assert codex_bridge.log_tail(10**9).count("unhandled GET /v1/responses") - handshakes_before == 1
