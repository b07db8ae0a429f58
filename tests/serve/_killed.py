"""The killed-turn scenario the kill tests and the killed-turn fault matrix share: a
real ``trio-agent serve`` (``_served``) whose model is a loopback
``FakeResponsesServer`` runs a turn that is provably running -- the model holds its
answer, or the command it asked for waits on a file -- when it gets SIGKILL; and how
a request's input and a thread view are compared (``conversation``/``shown``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trio_agent._rollout import INTERRUPTED_TEXT
from trio_agent.testing import AppServerClient, FakeResponsesServer, frames

from .._os_facts import pid_alive, processes_in, wait_for_os_fact, wait_gone
from ._served import Served

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
    """A thread whose last turn is running when this returns: the model holds its
    answer, or the command it asked for waits for ``workspace/go``; with ``gate``
    "second", a first turn has completed before it."""
    await client.initialize(name="durable")
    thread_id = (await client.request("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
    if gate == "second":
        first = await client.request("turn/start", {"threadId": thread_id, "input": text_input("the first prompt")})
        await (await model.accept_http()).send_final("resp-0", "the first answer")
        await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == first["turn"]["id"])
    prompt = "the killed prompt" if gate == "second" else "the first prompt"
    turn = await client.request("turn/start", {"threadId": thread_id, "input": text_input(prompt)})
    request = await model.accept_http()
    assert conversation(request.body)[-1:] == [("user", prompt)]  # a second request chains on the first
    await client.read_notification("turn/started", lambda p: p["turn"]["id"] == turn["turn"]["id"])
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
