"""A client written for ``codex app-server`` runs a thread end to end against
``trio-agent serve``: over stdio (a real ``trio-agent serve`` subprocess with the
built-in local model) and over WebSocket (the server in process on 127.0.0.1:0).

One scenario, both transports: initialize, start a thread, a turn whose ``exec`` cell
runs ``exec_command`` (command items with output deltas) and whose answer streams as
deltas, a second turn that is steered while its command runs and then interrupted,
unsubscribe (the thread unloads at once: ``--unload-delay 0``), resume cold from the
rollout. Real processes and sockets: Trio's real clock, each step bounded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio_websocket

import trio_agent as ta
from trio_agent._tools._sandbox import resolve_sandbox
from trio_agent.testing import AppServerClient, AppServerError, FakeResponsesServer, LineChannel, WebSocketChannel

from .._os_facts import pid_alive, processes_in, wait_gone, wait_no_processes_in
from ._harness import text_input
from ._live import serve_subprocess, websocket_server
from ._schema import validate_server_message

REPO = Path(ta.__file__).resolve().parent.parent
STEP = 20  # seconds for any one step (real processes)


async def scenario(client: AppServerClient, workspace: Path, home: Path) -> None:
    init = await client.initialize(name="codex-style-client", version="1.0.0")
    assert Path(init["codexHome"]) == home.resolve()

    started = await client.request("thread/start", {"model": "gpt-5.5", "cwd": str(workspace)})
    thread_id = started["thread"]["id"]
    assert started["thread"]["status"] == {"type": "idle"} and started["cwd"] == str(workspace.resolve())
    # The server's default sandbox: workspace-write where Bubblewrap works (CI), else the
    # library's fallback; the response says which one the thread really runs.
    confined = resolve_sandbox(None).fallback is None
    assert started["sandbox"]["type"] == ("workspaceWrite" if confined else "dangerFullAccess")
    assert started["approvalPolicy"] == "never"
    assert (await client.read_notification("thread/started"))["thread"]["id"] == thread_id

    # Turn 1: exec -> exec_command, streamed answer.
    first = await client.request("turn/start", {"threadId": thread_id, "input": text_input("run: echo hello")})
    first_id = first["turn"]["id"]
    done = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == first_id)
    assert done["turn"]["status"] == "completed"
    seen = client.take_pending()
    commands = [m["params"]["item"] for m in seen if m.get("method") == "item/completed"
                and m["params"]["item"]["type"] == "commandExecution"]
    # One item for the command, as codex shows it (the exec cell that ran it is no item).
    (shell,) = commands
    assert shell["commandActions"] == [{"type": "unknown", "command": "echo hello"}]
    assert shell["command"].endswith(" -lc 'echo hello'") and shell["source"] == "unifiedExecStartup"
    # (A login shell may print its own notices first, e.g. a version manager that cannot
    # write its cache from inside the sandbox.)
    assert shell["exitCode"] == 0 and shell["status"] == "completed" and shell["aggregatedOutput"].endswith("hello\n")
    output = [m["params"]["delta"] for m in seen if m.get("method") == "item/commandExecution/outputDelta"
              and m["params"]["itemId"] == shell["id"]]
    assert output and "".join(output) == shell["aggregatedOutput"]  # streamed as it ran
    deltas = [m["params"]["delta"] for m in seen if m.get("method") == "item/agentMessage/delta"]
    (answer,) = [m["params"]["item"] for m in seen if m.get("method") == "item/completed"
                 and m["params"]["item"]["type"] == "agentMessage"]
    assert len(deltas) > 1 and "".join(deltas) == answer["text"] and "hello" in answer["text"]
    assert done["turn"]["items"] == [answer]  # itemsView "summary": the answer

    # Turn 2: steered while its command runs, then interrupted.
    second = await client.request("turn/start", {"threadId": thread_id, "input": text_input("run: sleep 30")})
    second_id = second["turn"]["id"]
    await client.read_notification("item/started", lambda p: p["item"].get("commandActions") == [
        {"type": "unknown", "command": "sleep 30"}])
    steered = await client.request("turn/steer", {"threadId": thread_id, "expectedTurnId": second_id,
                                                  "input": text_input("and then say hi")})
    assert steered == {"turnId": second_id}
    try:
        await client.request("turn/steer", {"threadId": thread_id, "expectedTurnId": first_id,
                                            "input": text_input("not this one")})
        raise AssertionError("a steer naming a finished turn was accepted")
    except AppServerError as exc:
        assert exc.code == -32600 and second_id in exc.message
    assert await client.request("turn/interrupt", {"threadId": thread_id, "turnId": second_id}) == {}
    interrupted = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == second_id)
    assert interrupted["turn"]["status"] == "interrupted"
    await wait_no_processes_in(workspace)  # `sleep 30` was killed with its turn

    # Unsubscribe: with no subscriber and no turn the thread unloads at once.
    assert await client.request("thread/unsubscribe", {"threadId": thread_id}) == {"status": "unsubscribed"}
    assert await client.read_notification("thread/closed") == {"threadId": thread_id}
    assert await client.request("thread/loaded/list") == {"data": [], "nextCursor": None}

    # Resume cold: the same thread, its turns with their ids, from the rollout.
    resumed = await client.request("thread/resume", {"threadId": thread_id})
    assert resumed["thread"]["status"] == {"type": "idle"}
    assert [(t["id"], t["status"]) for t in resumed["thread"]["turns"]] == [
        (first_id, "completed"), (second_id, "interrupted")]
    third = await client.request("turn/start", {"threadId": thread_id, "input": text_input("still there?")})
    again = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == third["turn"]["id"])
    assert again["turn"]["status"] == "completed"


async def test_stdio_subprocess_end_to_end(tmp_path: Path) -> None:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "trio_agent", "serve", "--home", str(home), "--unload-delay", "0"]
    async with serve_subprocess(command, cwd=tmp_path, env=env) as (process, client):
        with trio.fail_after(STEP * 3):
            await scenario(client, workspace, home)
    await wait_gone([process.pid])
    assert not pid_alive(process.pid)
    assert processes_in(workspace) == []


@pytest.mark.parametrize("flag", [True, False])
async def test_serve_multi_agent_flag_reaches_the_server(tmp_path: Path, flag: bool) -> None:
    """``--multi-agent`` turns on child threads: the server started with it says so
    (from ``AppServer.multi_agent``) once it serves; without it, it does not."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "trio_agent", "serve", "--local", "--home", str(tmp_path / "home"),
               *(["--multi-agent"] if flag else [])]
    with trio.fail_after(STEP):
        done = await trio.run_process(command, stdin=b"", capture_stdout=True, capture_stderr=True, cwd=tmp_path,
                                      env=env, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "threads live under" in stderr  # it served (and stdin's end shut it down)
    assert ("their workers are child threads (--multi-agent)" in stderr) is flag


async def test_websocket_end_to_end(tmp_path: Path) -> None:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace) as port:
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}") as ws:
            client = AppServerClient(WebSocketChannel(ws), validate=validate_server_message)
            with trio.fail_after(STEP * 3):
                await scenario(client, workspace, home)
    assert processes_in(workspace) == []


async def test_many_websocket_clients_at_once(tmp_path: Path) -> None:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    answers: dict[int, str] = {}

    async def one_client(port: int, index: int) -> None:
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}/any/path") as ws:
            client = AppServerClient(WebSocketChannel(ws), validate=validate_server_message)
            await client.initialize(name=f"client-{index}")
            if index == 0:
                await client.send_raw("{not json")  # one client misbehaves; nobody else notices
                await client.read_notification("warning")
            thread_id = (await client.request("thread/start", {}))["thread"]["id"]
            started = await client.request("turn/start", {"threadId": thread_id,
                                                          "input": text_input(f"hello from {index}")})
            done = await client.read_notification("turn/completed",
                                                  lambda p: p["turn"]["id"] == started["turn"]["id"])
            answers[index] = done["turn"]["items"][0]["text"]

    async with websocket_server(home, workspace) as port:
        with trio.fail_after(STEP):
            async with trio.open_nursery() as nursery:
                for index in range(6):
                    nursery.start_soon(one_client, port, index)
    assert sorted(answers) == list(range(6))
    assert all(f"hello from {index}" in answer for index, answer in answers.items())


async def test_websocket_approvals_end_to_end(tmp_path: Path) -> None:
    """A codex-style client approving and declining commands of a sandboxed thread over
    a real WebSocket (the built-in local model runs ``run: <command>`` with exec_command)."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace) as port:
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}") as ws:
            client = AppServerClient(WebSocketChannel(ws), validate=validate_server_message)
            with trio.fail_after(STEP * 2):
                await client.initialize(name="codex-style-client")
                started = await client.request("thread/start", {"approvalPolicy": "untrusted", "cwd": str(workspace)})
                assert started["approvalPolicy"] == "untrusted"
                thread_id = started["thread"]["id"]
                for name, decision in (("kept.txt", "accept"), ("refused.txt", "decline")):
                    turn = await client.request("turn/start", {"threadId": thread_id,
                                                               "input": text_input(f"run: touch {name}")})
                    request = await client.read_server_request("item/commandExecution/requestApproval")
                    assert request.params["command"].endswith(f" -lc 'touch {name}'")  # the item's, as codex's
                    assert request.params["commandActions"] == [{"type": "unknown", "command": f"touch {name}"}]
                    assert request.params["threadId"] == thread_id
                    waiting = [m["params"]["status"] for m in client.take_pending("thread/status/changed")]
                    assert waiting[-1] == {"type": "active", "activeFlags": ["waitingOnApproval"]}
                    await client.respond(request.id, {"decision": decision})
                    done = await client.read_notification("turn/completed",
                                                          lambda p, t=turn: p["turn"]["id"] == t["turn"]["id"])
                    assert done["turn"]["status"] == "completed"
    assert (workspace / "kept.txt").exists() and not (workspace / "refused.txt").exists()
    assert processes_in(workspace) == []


async def test_serve_signs_in_and_connects_as_run_does(server: FakeResponsesServer, tmp_path: Path) -> None:
    """No ``OPENAI_API_KEY``: ``serve`` signs in with the Codex login (as ``run`` does,
    never the local model when a login exists), says so on stderr, and takes ``run``'s
    endpoint options (here ``--transport https --api-base``): the thread's model call
    reaches our server with the login's key."""
    import json

    codex, home = tmp_path / "codex", tmp_path / "home"
    codex.mkdir()
    (codex / "auth.json").write_text(json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-from-codex"}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(codex)}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "trio_agent", "serve", "--home", str(home), "--transport", "https",
               "--api-base", server.http_base_url]
    heads: list[dict[str, str]] = []

    async def model() -> None:
        request = await server.accept_http()
        heads.append(request.headers)
        await request.send_final("resp-1", "hello from the real endpoint")

    with (tmp_path / "stderr").open("wb") as stderr:
        process = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                   stderr=stderr, cwd=tmp_path, env=env)
    try:
        assert process.stdin is not None and process.stdout is not None
        client = AppServerClient(LineChannel(trio.StapledStream(process.stdin, process.stdout)),
                                 validate=validate_server_message)
        with trio.fail_after(STEP):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(model)
                await client.initialize(name="login-client")
                thread_id = (await client.request("thread/start", {"cwd": str(tmp_path)}))["thread"]["id"]
                turn = await client.request("turn/start", {"threadId": thread_id, "input": text_input("hi")})
                done = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn["turn"]["id"])
            assert done["turn"]["status"] == "completed"
            assert done["turn"]["items"][0]["text"] == "hello from the real endpoint"
            await process.stdin.aclose()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert heads[0]["authorization"] == "Bearer sk-from-codex"
    said = (tmp_path / "stderr").read_text()
    assert f"signed in with the Codex login at {codex}/auth.json (an API key)" in said
    assert "local scripted model" not in said


async def test_serve_refuses_endpoint_options_without_a_credential(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(tmp_path / "no-codex")}
    env.pop("OPENAI_API_KEY", None)
    with trio.fail_after(STEP):
        done = await trio.run_process([sys.executable, "-m", "trio_agent", "serve", "--api-base", "http://x/v1"],
                                      stdin=b"", capture_stdout=True, capture_stderr=True, cwd=tmp_path, env=env,
                                      check=False)
    assert done.returncode == 2
    assert "--api-base talks to a real Responses API, which needs a credential" in done.stderr.decode()
    assert done.stdout == b""
