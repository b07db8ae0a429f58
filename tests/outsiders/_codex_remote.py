"""The real codex CLI against ``trio-agent serve --listen ws://127.0.0.1:PORT``.

``served(tmp_path, model)`` runs ``trio-agent serve`` as a subprocess on a loopback
listener with its model either the built-in local one (``model="local"``) or a
``FakeResponsesServer`` on 127.0.0.1 in this process (``model="fake"``: an API key
and ``--websocket-url``), behind the logging proxy of ``_ws_proxy`` (codex connects to
the proxy, so every message both ways is kept and the server's are checked against the
codex schema). Codex gets a scratch ``CODEX_HOME`` (``codex_environment``) whose
``config.toml`` turns off what would reach a public host -- analytics, feedback, the
update check --, hides the start-up notices, marks the workspace trusted (codex 0.171
in ``--remote`` mode showed no onboarding or trust screen even without it), and names
a model provider on a dead loopback port; its environment sends any HTTP(S) to a dead
loopback proxy too. ``HOME`` is the test's, so no real ``~/.codex`` is read.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer

from .._os_facts import pid_alive
from ..serve._harness import Model, send_message
from ..serve._schema import validate_server_message
from ._clients import codex_binary
from ._ws_proxy import Proxy, logging_proxy

REPO = Path(ta.__file__).resolve().parent.parent
STEP = 60.0  # seconds for any one step: codex and the server start as real processes on a loaded machine
POLL = 0.05
DEAD_PORT = 9  # discard: nothing listens on 127.0.0.1:9 here
Json = dict[str, Any]


async def wait_until(check: Callable[[], bool], what: str) -> None:
    """Poll an OS fact (a file, a tmux pane, the process table) for at most ``STEP``
    seconds: no event tells this process when another process printed something."""
    with trio.move_on_after(STEP):
        while not check():  # noqa: ASYNC110 - an OS fact cannot set a trio.Event
            await trio.sleep(POLL)
        return
    raise AssertionError(f"{what} did not happen within {STEP} s")


def last_prompt(request: Json) -> str:
    texts = [part.get("text", "") for item in request.get("input", [])
             if item.get("type") == "message" and item.get("role") == "user" for part in item.get("content", [])]
    return texts[-1] if texts else ""


def fake_answer(prompt: str) -> str:
    return f"the loopback fake model heard: {prompt}"


async def _answer(conn: FakeConnection, request: Json) -> None:
    await send_message(conn, f"resp-{len(conn.requests)}", fake_answer(last_prompt(request)))


def codex_environment(tmp_path: Path, workspace: Path) -> dict[str, str]:
    """A scratch ``CODEX_HOME`` and an environment that keeps codex on loopback."""
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(f"""\
check_for_update_on_startup = false
model_provider = "loopback"

[model_providers.loopback]
name = "nothing listens here"
base_url = "http://127.0.0.1:{DEAD_PORT}/v1"

[analytics]
enabled = false

[feedback]
enabled = false

[notice]
hide_full_access_warning = true
hide_world_writable_warning = true
hide_rate_limit_model_nudge = true

[projects."{workspace}"]
trust_level = "trusted"
""")
    proxy = f"http://127.0.0.1:{DEAD_PORT}"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "CODEX_"))}
    return {**env, "CODEX_HOME": str(codex_home), "HOME": str(tmp_path), "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy,
            "ALL_PROXY": proxy, "https_proxy": proxy, "http_proxy": proxy, "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost", "RUST_LOG": "error"}


@attrs.define
class Served:
    """A running ``trio-agent serve`` behind the logging proxy."""

    process: trio.Process
    proxy: Proxy
    workspace: Path
    home: Path
    model: str
    fake: Model | None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.proxy.port}"

    def answer(self, prompt: str) -> str:
        """What the model answers a plain prompt (the local model's text starts so)."""
        return fake_answer(prompt) if self.model == "fake" else f"You said: '{prompt}'"

    def check_every_server_message(self) -> int:
        """Each message the server sent codex, against the schema; how many there were."""
        messages = self.proxy.server_messages()
        for message, answered in messages:
            validate_server_message(message, answered)
        return len(messages)


def _serve_command(home: Path, workspace: Path, model: str, fake_url: str | None) -> list[str]:
    command = [sys.executable, "-m", "trio_agent", "serve", "--home", str(home), "--workspace", str(workspace),
               "--listen", "ws://127.0.0.1:0"]
    return [*command, "--local"] if fake_url is None else [*command, "--websocket-url", fake_url]


@asynccontextmanager
async def served(tmp_path: Path, model: str) -> AsyncIterator[Served]:
    """``trio-agent serve`` on the ``model`` (``"local"`` or ``"fake"``) behind the proxy.
    Leaving the block stops it with SIGTERM and expects exit status 0."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "CODEX_"))}
    env.update(PYTHONPATH=str(REPO), CODEX_HOME=str(tmp_path / "no-codex-login"))
    async with trio.open_nursery() as nursery:
        fake: Model | None = None
        fake_url = None
        if model == "fake":
            server = FakeResponsesServer()
            await nursery.start(server.serve)
            fake = Model(server, _answer)
            nursery.start_soon(fake.serve)
            fake_url, env["OPENAI_API_KEY"] = server.url, "test-key"
        stderr_path = tmp_path / "serve.stderr"
        with stderr_path.open("wb") as stderr:
            process = await trio.lowlevel.open_process(_serve_command(home, workspace, model, fake_url), env=env,
                                                       cwd=tmp_path, stdin=subprocess.DEVNULL, stderr=stderr)
        async with reaped(process):
            found: list[int] = []

            def listening() -> bool:
                match = re.search(r"listening on ws://127\.0\.0\.1:(\d+)", stderr_path.read_text())
                if match:
                    found.append(int(match.group(1)))
                return bool(match) or process.poll() is not None

            await wait_until(listening, "trio-agent serve listening")
            assert found, f"trio-agent serve exited: {stderr_path.read_text()}"
            async with logging_proxy(found[0]) as proxy:
                yield Served(process, proxy, workspace, home, model, fake)
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(STEP):
                assert await process.wait() == 0, stderr_path.read_text()
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def reaped(process: trio.Process) -> AsyncIterator[None]:
    """The block waits for ``process`` as it likes; after it, the process is gone
    (killed if the block left it running), checked by pid."""
    try:
        yield
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    assert not pid_alive(process.pid)


async def read_turns(server: Served, thread_id: str) -> list[Json]:
    """The thread's turns as ``thread/read`` shows them (asked through the proxy, so the
    answer is checked with the rest)."""
    import json

    import trio_websocket

    async with trio_websocket.open_websocket_url(server.url) as ws:
        for message in ({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "check", "version": "1"}}},
                        {"method": "initialized"},
                        {"id": 2, "method": "thread/read", "params": {"threadId": thread_id, "includeTurns": True}}):
            await ws.send_message(json.dumps(message))
        with trio.fail_after(STEP):
            while True:
                answer = json.loads(await ws.get_message())
                if answer.get("id") == 2:
                    return list(answer["result"]["thread"]["turns"])


def tcp_peers(pid: int) -> set[str]:
    """The remote addresses of the TCP sockets ``pid`` holds (from /proc), e.g. ``127.0.0.1``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    peers = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and fields[3] != "0A":  # not a listening socket
                peers.add(_address(fields[2].split(":")[0], width))
    return peers


def _address(hex_address: str, width: int) -> str:
    raw = bytes.fromhex(hex_address)
    if width == 8:
        return ".".join(str(b) for b in raw[::-1])
    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
    data = b"".join(words)
    if data[:12] == b"\0" * 10 + b"\xff\xff":  # an IPv4-mapped address
        return ".".join(str(b) for b in data[12:])
    return ":".join(data[i:i + 2].hex() for i in range(0, 16, 2))


def codex() -> str:
    return str(codex_binary())
