"""Ports of codex ``websocket_test_codex_shell_chain`` and ``websocket_v2_test_codex_shell_chain``
(``seeds/codex_agent_websocket_tests.rs.txt``): a turn whose first response calls a shell
command continues, on the same WebSocket, with the command's output.

Where this runtime deviates from the seeds (SPEC wins where it differs):

- Tools (SPEC secs. 2 and 7): there is no ``shell_command`` function tool. The model runs
  a command through the ``exec`` custom tool (code mode) calling
  ``tools.exec_command({cmd})``, and the continuation carries a
  ``custom_tool_call_output`` with the call's id where codex's carries a
  ``function_call_output``. The command is the seed's ``echo websocket``; each port also
  checks that its output reached the model (the seed only names the call id).
- One WebSocket protocol (SPEC sec. 3): every agent warms up on its socket at startup
  (``generate: false``) and sends the ``openai-beta: responses_websockets=2026-02-06``
  header. codex's v1 WebSocket (the first seed) has neither, so the first seed's
  connection holds three requests here (warmup, turn, continuation) where it holds two;
  its two ``response.create`` are the last two. The v2 seed is this runtime's protocol
  exactly.
- ``with_windows_cmd_shell`` selects codex's Windows shell; the ports run the
  workspace's shell (``exec_command``'s default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeResponsesServer, Handshake

from .._codex_frames import ev_assistant_message, ev_completed, ev_response_created
from ..conftest import make_config, scripted

WS_V2_BETA_HEADER_VALUE = "responses_websockets=2026-02-06"
CALL_ID = "shell-command-call"


def ev_shell_command_call(call_id: str, command: str) -> dict[str, Any]:
    """The seed's ``ev_shell_command_call``, adapted (SPEC sec. 7): the command runs
    through ``exec`` and ``tools.exec_command``, not a ``shell_command`` function."""
    source = f"const result = await tools.exec_command({{cmd: {command!r}}}); text(result.output);"
    return {"type": "response.output_item.done", "item": {
        "type": "custom_tool_call", "call_id": call_id, "name": "exec", "input": source}}


def call_output(body: dict[str, Any], call_id: str) -> list[dict[str, Any]]:
    """The seed's ``function_call_output`` lookup, as ``exec``'s ``custom_tool_call_output``."""
    return [item for item in body["input"]
            if item.get("type") == "custom_tool_call_output" and item.get("call_id") == call_id]


async def shell_chain(server: FakeResponsesServer, workspace: Path) -> tuple[list[dict[str, Any]], Handshake]:
    """The seeds' server: warmup (here always), the shell call, then ``done``. Returns
    every request of the one connection and its handshake."""
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await server.accept()
        bodies.append(await conn.next_request())
        await conn.send_all([ev_response_created("warm-1"), ev_completed("warm-1")])
        bodies.append(await conn.next_request())
        await conn.send_all([ev_response_created("resp-1"), ev_shell_command_call(CALL_ID, "echo websocket"),
                             ev_completed("resp-1")])
        bodies.append(await conn.next_request())
        await conn.send_all([ev_response_created("resp-2"), ev_assistant_message("msg-1", "done"),
                             ev_completed("resp-2")])
        with pytest.raises(ClientDisconnected):
            bodies.append(await conn.next_request())  # nothing more on this connection

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        with trio.fail_after(10):
            result = await (await agent.prompt("run the echo command")).result()
    assert result.final_message == "done"
    (handshake,) = server.handshakes  # server.single_connection()
    return bodies, handshake


async def test_websocket_test_codex_shell_chain(server: FakeResponsesServer, workspace: Path) -> None:
    bodies, _ = await shell_chain(server, workspace)
    # The seed: connection.len() == 2. Here the startup warmup comes first (SPEC sec. 3),
    # so the seed's two requests are the last two of three.
    assert len(bodies) == 3
    assert bodies[0]["generate"] is False
    first_turn, second_turn = bodies[1:]
    assert first_turn["type"] == "response.create"
    assert second_turn["type"] == "response.create"
    input_items = second_turn["input"]
    assert isinstance(input_items, list) and input_items
    # Beyond the seed (its input is only non-empty): the command ran and its output is there.
    (output,) = call_output(second_turn, CALL_ID)
    assert "websocket" in str(output["output"])


async def test_websocket_v2_test_codex_shell_chain(server: FakeResponsesServer, workspace: Path) -> None:
    bodies, handshake = await shell_chain(server, workspace)
    assert len(bodies) == 3
    warmup, first_turn, second_turn = bodies
    assert warmup["type"] == "response.create"
    assert warmup["generate"] is False
    assert first_turn["type"] == "response.create"
    assert first_turn["previous_response_id"] == "warm-1"
    assert isinstance(first_turn["input"], list) and first_turn["input"]
    assert second_turn["type"] == "response.create"
    assert second_turn["previous_response_id"] == "resp-1"
    create_items = second_turn["input"]
    assert isinstance(create_items, list) and create_items
    # The seed: a function_call_output with the call id; exec's is a custom_tool_call_output
    # (SPEC sec. 7).
    outputs = call_output(second_turn, CALL_ID)
    assert [item["call_id"] for item in outputs] == [CALL_ID]
    assert "websocket" in str(outputs[0]["output"])
    assert handshake.headers["openai-beta"] == WS_V2_BETA_HEADER_VALUE
