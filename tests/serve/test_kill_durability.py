"""History survives a kill (issue 23, item 2; docs/app-server.md, "Durability").

A real ``trio-agent serve`` (on stdio, and on ``--listen ws://127.0.0.1:0``) whose
model is a ``FakeResponsesServer`` on loopback runs a turn that is provably running --
the model holds its answer (the server is waiting on it), or the command the model
asked for waits on a file (it is running) -- when the server gets SIGKILL. After a
restart on the same ``--home``:

- ``thread/read`` and ``thread/resume`` show that turn, ``interrupted``, with the
  input it had (and the command it was running);
- the next turn's request to the model carries exactly what the view shows: item by
  item, the prompts, the cell whose command the view shows (answered as aborted), and
  the ``<turn_aborted>`` marker where the view says ``interrupted``;
- the restored turn stays as it is through another restart.

Before the fix the killed turn was missing from both views while its prompt went to
the model in the next turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent._rollout import INTERRUPTED_TEXT
from trio_agent.testing import AppServerClient, FakeResponsesServer, frames

from .._os_facts import pid_alive, processes_in, wait_for_os_fact, wait_gone
from ..cli._cli import cli_env
from ._live import STEP
from ._served import TRANSPORTS, Served, served

Json = dict[str, Any]


def text_input(text: str) -> list[Json]:
    return [{"type": "text", "text": text, "text_elements": []}]


def serve_args(home: Path, model: FakeResponsesServer) -> list[str]:
    return ["--home", str(home), "--transport", "https", "--api-base", model.http_base_url]


def cell(started: Path, gate: Path) -> str:
    command = f"touch {started}; until [ -e {gate} ]; do sleep 0.05; done; echo released"
    return (f"const r = await tools.exec_command({{cmd: {json.dumps(command)}, login: false, "
            "yield_time_ms: 30000});\ntext(r.output);")


def conversation(request: Json) -> list[tuple[str, str]]:
    """What a request's input says happened, item by item: ``("user", text)`` for a
    prompt or steer, ``("cell", call id)`` for a tool call, ``("interrupted", "")`` for
    the marker a killed turn gets; context messages (developer, the environment) and
    tool outputs are not turns' items."""
    said: list[tuple[str, str]] = []
    for item in request["input"]:
        if item.get("type") in ("function_call", "custom_tool_call"):
            said.append(("cell", item["call_id"]))
        elif item.get("type") == "message" and item.get("role") == "user":
            text = item["content"][0]["text"]
            if text == INTERRUPTED_TEXT:
                said.append(("interrupted", ""))
            elif not text.startswith(("<environment_context>", "# AGENTS.md")):
                said.append(("user", text))
        elif item.get("type") == "message" and item.get("role") == "assistant":
            said.append(("agent", item["content"][0]["text"]))
    return said


def shown(turns: list[Json]) -> list[tuple[str, str]]:
    """The same, from the thread view: each turn's items, and ``interrupted`` after an
    interrupted turn's; a cell is shown as the commands it ran (one entry per cell)."""
    said: list[tuple[str, str]] = []
    for turn in turns:
        for item in turn["items"]:
            if item["type"] == "userMessage":
                said.append(("user", "\n".join(part["text"] for part in item["content"] if part["type"] == "text")))
            elif item["type"] == "agentMessage":
                said.append(("agent", item["text"]))
            elif item["type"] == "commandExecution" and ("cell", item["id"].partition("/code-")[0]) not in said:
                said.append(("cell", item["id"].partition("/code-")[0]))
        if turn["status"] == "interrupted":
            said.append(("interrupted", ""))
    return said


async def start_running_turn(client: AppServerClient, model: FakeResponsesServer, workspace: Path, gate: str,
                             ) -> tuple[str, str]:
    """A thread whose first turn is running when this returns: the model holds its
    answer, or the command it asked for waits for ``workspace/go``."""
    await client.initialize(name="durable")
    thread_id = (await client.request("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
    turn = await client.request("turn/start", {"threadId": thread_id, "input": text_input("the first prompt")})
    request = await model.accept_http()
    assert conversation(request.body) == [("user", "the first prompt")]
    await client.read_notification("turn/started")
    if gate == "command":
        call = frames.custom_tool_call("call-cell", "exec", cell(workspace / "started", workspace / "go"),
                                       item_id="ctc-1")
        await request.send_sse([frames.output_item_done(0, call), frames.completed("resp-1", [call])])
        await client.read_notification("item/started", lambda p: p["item"]["type"] == "commandExecution")
        await wait_for_os_fact((workspace / "started").exists, "the command's start")
    return thread_id, turn["turn"]["id"]


async def killed(server: Served, workspace: Path, gate: str) -> None:
    """SIGKILL the server; then it, and whatever it ran, are gone (the command is let
    go, it is never killed mid-start)."""
    commands = processes_in(workspace)
    assert bool(commands) == (gate == "command"), commands
    server.kill()
    assert await server.process.wait() == -9
    (workspace / "go").touch()
    await wait_gone([server.process.pid, *commands])
    assert not pid_alive(server.process.pid) and processes_in(workspace) == []


@pytest.mark.parametrize("gate", ["model", "command"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_turn_killed_with_its_server_is_interrupted_and_the_next_request_agrees(
    tmp_path: Path, transport: str, gate: str
) -> None:
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    workspace.mkdir()
    env = cli_env(OPENAI_API_KEY="sk-test")
    async with trio.open_nursery() as nursery:
        model = FakeResponsesServer()
        await nursery.start(model.serve)
        print("MODEL", model.http_base_url)
        with trio.fail_after(STEP * 3):
            async with served(transport, serve_args(home, model), cwd=tmp_path, env=env) as (server, client):
                thread_id, turn_id = await start_running_turn(client, model, workspace, gate)
                await killed(server, workspace, gate)

            async with served(transport, serve_args(home, model), cwd=tmp_path, env=env) as (_, client):
                await client.initialize(name="after-the-kill")
                read = (await client.request("thread/read", {"threadId": thread_id, "includeTurns": True}))["thread"]
                (turn,) = read["turns"]
                assert (turn["id"], turn["status"]) == (turn_id, "interrupted")
                assert turn["items"][0]["type"] == "userMessage"
                assert turn["items"][0]["content"] == text_input("the first prompt")
                if gate == "command":
                    (command,) = turn["items"][1:]
                    assert command["type"] == "commandExecution" and command["id"] == "call-cell/code-1"
                    assert "until [ -e" in command["commandActions"][0]["command"]
                else:
                    assert len(turn["items"]) == 1
                resumed = await client.request("thread/resume", {"threadId": thread_id})
                assert resumed["thread"]["turns"] == read["turns"]

                second = await client.request("turn/start", {"threadId": thread_id,
                                                             "input": text_input("the second prompt")})
                request = await model.accept_http()
                await request.send_final("resp-2", "the answer")
                await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == second["turn"]["id"])
                view = (await client.request("thread/read", {"threadId": thread_id, "includeTurns": True}))["thread"]

            said = conversation(request.body)
            assert said == shown(view["turns"])[:-1]  # all but the answer to this very request
            assert said == [("user", "the first prompt"), *([("cell", "call-cell")] if gate == "command" else []),
                            ("interrupted", ""), ("user", "the second prompt")]
            assert shown(view["turns"])[-1] == ("agent", "the answer")
            if gate == "command":
                (answered,) = [item for item in request.body["input"] if item.get("type") == "custom_tool_call_output"]
                assert answered["call_id"] == "call-cell" and "aborted" in json.dumps(answered["output"])

            async with served(transport, serve_args(home, model), cwd=tmp_path, env=env) as (_, client):
                await client.initialize(name="once-more")
                again = await client.request("thread/read", {"threadId": thread_id, "includeTurns": True})
                assert again["thread"]["turns"] == view["turns"]
        nursery.cancel_scope.cancel()
