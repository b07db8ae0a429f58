"""``trio-agent [-c key=value]... app-server --listen stdio://``: codex's argv starts the
app server, the overrides it implements configure it (each visible on the wire or in
what a command may do), the rest is said once on stderr, and a bad one exits 2 in one
line before anything is served. ``app-server generate-json-schema`` writes codex's
layout. All fail on main (``invalid choice: 'app-server'``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._serve._schema_export import ACCEPTED
from trio_agent._tools._sandbox import resolve_sandbox
from trio_agent.testing import AppServerClient, FakeResponsesServer

from ._harness import Model, answer_done, text_input
from ._live import serve_subprocess
from ._schema import document

REPO = Path(ta.__file__).resolve().parent.parent
STEP = 20  # seconds for any one step (real processes)
CONFINED = resolve_sandbox(None).fallback is None  # Bubblewrap works here (CI)
Json = dict[str, Any]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(tmp_path / "no-codex"), **extra}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE_URL", "OPENAI_RESPONSES_WEBSOCKET_URL"):
        if name not in extra:
            env.pop(name, None)
    return env


def _command(tmp_path: Path, *before: str, after: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "trio_agent", *before, "app-server", "--listen", "stdio://",
            "--home", str(tmp_path / "home"), *after]


async def _session(tmp_path: Path, command: list[str], env: dict[str, str], steps: Any) -> tuple[Any, str]:
    """Run ``command``, drive it with ``steps(client)``, close its stdin; (steps' result, stderr)."""
    with (tmp_path / "stderr").open("wb") as stderr:
        async with serve_subprocess(command, cwd=tmp_path, env=env, stderr=stderr.fileno()) as (_, client):
            with trio.fail_after(STEP * 2):
                await client.initialize(name="codex_python_sdk", version="0.163.0")
                result = await steps(client)
    return result, (tmp_path / "stderr").read_text()


async def _turn(client: AppServerClient, thread_id: str, text: str) -> Json:
    turn = await client.request("turn/start", {"threadId": thread_id, "input": text_input(text)})
    done: Json = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn["turn"]["id"])
    return done


async def test_overrides_configure_new_threads_and_the_rest_is_said_once(tmp_path: Path) -> None:
    """Top-level ``-c`` before ``app-server`` (as the Python SDK puts them) and after it
    (codex's ``-c`` is global): the thread's settings are the overrides'."""
    command = _command(tmp_path, "-c", 'model="gpt-5.4"', "--config", "model_reasoning_effort=high",
                       "-c", "approval_policy=untrusted", "-c", "zeta.x=1", "-c", "model_verbosity=high",
                       after=("-c", "features.foo=true", "-c", "web_search=disabled"))

    async def steps(client: AppServerClient) -> Json:
        started: Json = await client.request("thread/start", {"cwd": str(tmp_path)})
        done = await _turn(client, started["thread"]["id"], "hello")
        assert done["turn"]["status"] == "completed"
        return started

    started, stderr = await _session(tmp_path, command, _env(tmp_path), steps)
    assert (started["model"], started["reasoningEffort"], started["approvalPolicy"]) == ("gpt-5.4", "high", "untrusted")
    line = "trio-agent: ignoring codex config keys it does not implement: features.foo, zeta.x"  # web_search: applied
    assert stderr.count("ignoring codex config keys") == 1 and line in stderr.splitlines(), stderr


@pytest.mark.skipif(not CONFINED, reason="needs Bubblewrap (the sandbox) to work here")
@pytest.mark.parametrize(("mode", "written"), [("read-only", False), ("workspace-write", True)])
async def test_sandbox_mode_override_confines_commands(tmp_path: Path, mode: str, written: bool) -> None:
    """``-c sandbox_mode=read-only``: a command cannot write the workspace; the positive
    control, ``workspace-write``, can."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    async def steps(client: AppServerClient) -> Json:
        started: Json = await client.request("thread/start", {"cwd": str(workspace)})
        await _turn(client, started["thread"]["id"], "run: touch made-here")
        return started

    started, _ = await _session(tmp_path, _command(tmp_path, "-c", f'sandbox_mode="{mode}"'), _env(tmp_path), steps)
    assert started["sandbox"]["type"] == {"read-only": "readOnly", "workspace-write": "workspaceWrite"}[mode]
    assert (workspace / "made-here").exists() is written


@pytest.mark.skipif(not CONFINED, reason="needs Bubblewrap (the sandbox) to work here")
@pytest.mark.parametrize("network", [True, False])
async def test_workspace_write_network_override(tmp_path: Path, network: bool) -> None:
    async def steps(client: AppServerClient) -> Json:
        started: Json = await client.request("thread/start", {"cwd": str(tmp_path)})
        return started

    command = _command(tmp_path, "-c", f"sandbox_workspace_write.network_access={str(network).lower()}")
    started, _ = await _session(tmp_path, command, _env(tmp_path), steps)
    assert started["sandbox"] == {**started["sandbox"], "type": "workspaceWrite", "networkAccess": network}


@pytest.mark.parametrize("how", ["openai_base_url", "model_provider"])
async def test_endpoint_and_key_overrides_reach_the_model(server: FakeResponsesServer, tmp_path: Path,
                                                          how: str) -> None:
    """``-c openai_base_url=...`` with ``OPENAI_API_KEY``, or a ``model_providers.<id>``
    with its ``base_url`` and ``env_key``: the thread's model calls go to our loopback
    server with that key (never the local scripted model)."""
    if how == "openai_base_url":
        overrides = ["-c", f'openai_base_url="{server.http_base_url}"']
        env, key = _env(tmp_path, OPENAI_API_KEY="sk-openai"), "sk-openai"
    else:
        overrides = ["-c", 'model_provider="local"', "-c", f'model_providers.local.base_url="{server.http_base_url}"',
                     "-c", 'model_providers.local.env_key="LOCAL_KEY"']
        env, key = _env(tmp_path, LOCAL_KEY="sk-local"), "sk-local"
    model = Model(server, answer_done)

    async def steps(client: AppServerClient) -> Json:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(model.serve)
            thread_id = (await client.request("thread/start", {"cwd": str(tmp_path)}))["thread"]["id"]
            done = await _turn(client, thread_id, "hi")
            nursery.cancel_scope.cancel()
        return done

    done, stderr = await _session(tmp_path, _command(tmp_path, *overrides), env, steps)
    assert done["turn"]["status"] == "completed" and done["turn"]["items"][0]["text"] == "Done"
    assert model.requests and all(h.headers["authorization"] == f"Bearer {key}" for h in server.handshakes)
    assert "local scripted model" not in stderr


@pytest.mark.parametrize(("args", "env", "says"), [
    (["-c", "sandbox_mode=yolo"], {}, "-c sandbox_mode: must be one of read-only, workspace-write"),
    (["-c", "model"], {}, "expected key=value"),
    (["-c", "approval_policy=on-failure"], {}, "on-failure has no app-server equivalent"),
    (["-c", "model_provider=nowhere"], {}, "'nowhere' is neither 'openai' nor defined"),
    (["-c", "model_provider=p", "-c", 'model_providers.p.base_url="http://127.0.0.1:1/v1"',
      "-c", "model_providers.p.env_key=NO_SUCH_KEY"], {}, "NO_SUCH_KEY, which is not set"),
    (["-c", 'openai_base_url="http://127.0.0.1:1/v1"'], {}, "needs a credential"),
    (["-c", 'sandbox_workspace_write.writable_roots=["/no/such/dir"]'], {}, "is not an existing absolute directory"),
])
async def test_a_bad_override_exits_2_in_one_line(tmp_path: Path, args: list[str], env: dict[str, str],
                                                   says: str) -> None:
    with trio.fail_after(STEP):
        done = await trio.run_process(_command(tmp_path, *args), stdin=b"", capture_stdout=True,
                                      capture_stderr=True, cwd=tmp_path, env=_env(tmp_path, **env), check=False)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2 and done.stdout == b""
    assert len(lines) == 1 and says in lines[0], lines


@pytest.mark.parametrize(("argv", "says"), [
    (["app-server", "--listen", "unix://"], "--listen takes stdio:// or ws://HOST:PORT"),
    (["-c", "model=x", "serve"],
     "-c/--config (codex's config overrides) applies to run and resume and app-server and exec"),
    (["app-server", "--ws-auth", "signed-bearer-token"], "invalid choice: 'signed-bearer-token'"),
    # serve's listener policy holds here too (the loopback listener of the next test is its control)
    (["app-server", "--listen", "ws://0.0.0.0:0"], "refusing to listen on 0.0.0.0 without authentication"),
])
async def test_what_is_not_here_is_refused(tmp_path: Path, argv: list[str], says: str) -> None:
    with trio.fail_after(STEP):
        done = await trio.run_process([sys.executable, "-m", "trio_agent", *argv], stdin=b"", capture_stdout=True,
                                      capture_stderr=True, cwd=tmp_path, env=_env(tmp_path), check=False)
    assert done.returncode == 2 and says in done.stderr.decode() and done.stdout == b""


async def test_websocket_listen_takes_codex_flags(tmp_path: Path) -> None:
    """``--listen ws://`` with codex's ``--ws-auth capability-token --ws-token-file``:
    a token file others may read is refused, as ``serve`` refuses it; a private one
    (the positive control) listens, until SIGTERM stops it cleanly."""
    token = tmp_path / "token"
    token.write_text("secret\n")
    token.chmod(0o644)
    command = [sys.executable, "-m", "trio_agent", "app-server", "--listen", "ws://127.0.0.1:0",
               "--ws-auth", "capability-token", "--ws-token-file", str(token), "--home", str(tmp_path / "home")]
    with trio.fail_after(STEP):
        done = await trio.run_process(command, stdin=b"", capture_stdout=True, capture_stderr=True, cwd=tmp_path,
                                      env=_env(tmp_path), check=False)
    assert done.returncode == 2 and "is open to group or others" in done.stderr.decode()
    token.chmod(0o600)
    process = await trio.lowlevel.open_process(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.PIPE, cwd=tmp_path, env=_env(tmp_path))
    try:
        assert process.stderr is not None
        said = b""
        with trio.fail_after(STEP):
            while b"listening on ws://127.0.0.1:" not in said:
                chunk = await process.stderr.receive_some()
                assert chunk, said
                said += chunk
            process.terminate()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("experimental", [True, False])
async def test_generate_json_schema_writes_codex_layout(tmp_path: Path, experimental: bool) -> None:
    """As the Python SDK runs it (``[bin, --config kv..., app-server, generate-json-schema,
    --experimental, --out DIR]``): the params files list what this server honours."""
    out = tmp_path / "schema"
    command = [sys.executable, "-m", "trio_agent", "--config", "model=x", "app-server", "generate-json-schema",
               *(["--experimental"] if experimental else []), "--out", str(out)]
    with trio.fail_after(STEP):
        done = await trio.run_process(command, capture_stdout=True, capture_stderr=True, cwd=tmp_path,
                                      env=_env(tmp_path), check=False)
    assert done.returncode == 0, done.stderr
    for name, method in (("TurnStartParams", "turn/start"), ("ThreadResumeParams", "thread/resume"),
                         ("ThreadForkParams", "thread/fork"), ("ThreadStartParams", "thread/start")):
        properties = set(json.loads((out / "v2" / f"{name}.json").read_text())["properties"])
        stable = set(document()["definitions"]["v2"][name]["properties"])  # codex's, without --experimental
        expected = ACCEPTED[method] if experimental else ACCEPTED[method] & stable
        assert properties == expected, (name, properties ^ expected)
    assert experimental or "dynamicTools" not in json.loads((out / "v2" / "ThreadStartParams.json").read_text())[
        "properties"]  # experimental in codex 0.171
    assert "excludeTurns" in json.loads((out / "v2" / "ThreadResumeParams.json").read_text())["properties"]
    assert "turnTrigger" not in json.loads((out / "v2" / "TurnStartParams.json").read_text())["properties"]
    assert (out / "codex_app_server_protocol.schemas.json").is_file() and (out / "ClientRequest.json").is_file()


async def test_generate_json_schema_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    command = [sys.executable, "-m", "trio_agent", "app-server", "generate-json-schema", "--out",
               str(tmp_path / "file" / "sub")]
    with trio.fail_after(STEP):
        done = await trio.run_process(command, capture_stdout=True, capture_stderr=True, cwd=tmp_path,
                                      env=_env(tmp_path), check=False)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "cannot write" in lines[0]
