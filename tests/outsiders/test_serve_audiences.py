"""Who gets which notification, measured on the real ``codex app-server`` (0.171.0) and
on ``trio-agent serve`` side by side (issue 23, item 5): two WebSocket clients, A and
B. A starts a thread and runs a turn; B, subscribed to nothing, gets that thread's
``thread/started`` and both ``thread/status/changed`` (active, idle) -- what describes
the thread list goes to every initialized connection -- and nothing of the turn (no
``turn/*``, ``item/*``, token usage). Once B resumes the thread it gets A's next turn.

The same script runs against both servers and the two audiences must agree. codex
runs with a scratch ``CODEX_HOME`` (``codex_environment``: analytics, feedback and the
update check off, every HTTP(S) proxy a dead loopback port) whose model provider is
``trio_agent.cli._bench``'s child-process Responses server on 127.0.0.1 (codex's wire for
such a provider is HTTP/SSE); it holds no TCP peer but loopback. trio-agent runs as in
the other outsider tests (``served(..., "fake")``: behind the logging proxy, every
message it sent checked against the codex schema).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio_websocket

from trio_agent.cli._bench._server import Settings, open_bench_server
from trio_agent.testing import AppServerClient, WebSocketChannel

from ._codex_remote import STEP, codex, codex_environment, reaped, served, tcp_peers, wait_until

Json = dict[str, Any]
PROVIDER = """\
model = "gpt-5.5"
model_provider = "bench"
check_for_update_on_startup = false

[model_providers.bench]
name = "bench"
base_url = "{base_url}"
env_key = "BENCH_KEY"
wire_api = "responses"

[analytics]
enabled = false

[feedback]
enabled = false
"""


@asynccontextmanager
async def codex_app_server(tmp_path: Path, workspace: Path) -> AsyncIterator[str]:
    """``codex app-server --listen ws://127.0.0.1:0`` on the bench model server; its URL."""
    env = codex_environment(tmp_path, workspace)
    async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=3)) as model:
        (Path(env["CODEX_HOME"]) / "config.toml").write_text(PROVIDER.format(base_url=model.http_base_url))
        stderr_path = tmp_path / "codex.stderr"
        with stderr_path.open("wb") as stderr:
            process = await trio.lowlevel.open_process(
                [codex(), "app-server", "--listen", "ws://127.0.0.1:0"], env={**env, "BENCH_KEY": "bench"},
                cwd=workspace, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        async with reaped(process):
            found: list[str] = []

            def listening() -> bool:
                match = re.search(r"listening on: (ws://127\.0\.0\.1:\d+)", stderr_path.read_text(errors="replace"))
                if match:
                    found.append(match.group(1))
                return bool(match) or process.poll() is not None

            await wait_until(listening, "codex app-server listening")
            assert found, stderr_path.read_text()
            yield found[0]
            assert tcp_peers(process.pid) <= {"127.0.0.1"}, tcp_peers(process.pid)


@asynccontextmanager
async def two_clients(url: str) -> AsyncIterator[tuple[AppServerClient, AppServerClient]]:
    async with trio_websocket.open_websocket_url(url, max_message_size=64 << 20) as ws_a, \
            trio_websocket.open_websocket_url(url, max_message_size=64 << 20) as ws_b:
        a, b = AppServerClient(WebSocketChannel(ws_a)), AppServerClient(WebSocketChannel(ws_b))
        for client, name in ((a, "a"), (b, "b")):
            await client.initialize(name=name)
        yield a, b


def naming(client: AppServerClient, thread_id: str) -> list[str]:
    """The methods (and thread statuses) of what ``client`` got about ``thread_id``, in order."""
    shown = []
    for message in client.take_pending():
        params = message.get("params") or {}
        if params.get("threadId") == thread_id or (params.get("thread") or {}).get("id") == thread_id:
            status = params.get("status", {}).get("type")
            shown.append(f"{message['method']} {status}" if status else message["method"])
    return shown


async def audience(url: str, cwd: Path) -> tuple[list[str], list[str]]:
    """(what B got of A's thread while not subscribed, the methods of A's second turn
    that B got once it resumed the thread)."""
    text = [{"type": "text", "text": "hello"}]
    async with two_clients(url) as (a, b):
        with trio.fail_after(STEP):
            thread_id = (await a.request("thread/start", {"cwd": str(cwd)}))["thread"]["id"]
            await a.request("turn/start", {"threadId": thread_id, "input": text})
            await a.read_notification("turn/completed")
            # Both servers queue the idle status before A's turn/completed, and B's answer
            # after what was queued for B before it: B has everything by now.
            await b.request("thread/loaded/list", {})
            unsubscribed = naming(b, thread_id)
            await b.request("thread/resume", {"threadId": thread_id})
            b.take_pending()
            await a.request("turn/start", {"threadId": thread_id, "input": text})
            await b.read_notification("turn/completed", lambda p: p["threadId"] == thread_id)  # taken: not pending
            turn = {m.split()[0] for m in naming(b, thread_id) if m.startswith(("turn/", "item/"))}
            subscribed = sorted(turn | {"turn/completed"})
    return unsubscribed, subscribed


async def test_a_client_gets_another_clients_thread_list_notifications_as_codex_does(tmp_path: Path) -> None:
    workspace = tmp_path / "codex-workspace"
    workspace.mkdir()
    async with codex_app_server(tmp_path, workspace) as url:
        codex_unsubscribed, codex_subscribed = await audience(url, workspace)
    (tmp_path / "trio").mkdir()
    async with served(tmp_path / "trio", "fake") as server:
        ours_unsubscribed, ours_subscribed = await audience(server.url, server.workspace)
        assert server.check_every_server_message() > 0
    # B gets the thread list's news of A's thread, and nothing of its turn ...
    expected = ["thread/started", "thread/status/changed active", "thread/status/changed idle"]
    assert codex_unsubscribed == expected, codex_unsubscribed
    assert ours_unsubscribed == codex_unsubscribed
    # ... until it subscribes (thread/resume): then it gets the turn too.
    assert {"turn/started", "turn/completed", "item/started", "item/completed"} <= set(codex_subscribed)
    assert ours_subscribed == codex_subscribed, (ours_subscribed, codex_subscribed)
