"""``serve --ws-token-file PATH``: the capability token must not be readable by the
commands the server's threads run (this session's review). The sandbox lets a command
read what the user can, so a command read the token file -- and with
``Sandbox(network=True)``, or from any process of the user, used it to open an
unconfined thread. The server names the file in its environment's
``TRIO_AGENT_SANDBOX_HIDE`` (``_sandbox_hide.hide_from_commands``) and every sandboxed
command sees ``/dev/null`` there, as the ssh-agent's socket is hidden.

Positive controls: another file beside it is still read by the same command, and the
server still accepts the token. The file is inside the workspace, where the sandbox
shows it (a file under the host's ``/tmp`` is hidden by the private ``/tmp`` anyway).

Shown to fail without the fix: with ``_command``'s ``hide_from_commands`` call removed,
``token.txt`` holds the token.
"""

from __future__ import annotations

import signal
from pathlib import Path

import trio
import trio_websocket

from trio_agent.testing import AppServerClient, WebSocketChannel

from ..cli._cli import cli_env, open_cli
from ._harness import text_input
from ._live import STEP
from .test_listener_security import port_of

TOKEN = "capability-in-a-file"


async def test_a_sandboxed_command_does_not_read_the_token_file(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    secrets = workspace / "secrets"
    secrets.mkdir(parents=True)
    token_file, other = secrets / "token", secrets / "other"
    token_file.write_text(f"{TOKEN}\n")
    token_file.chmod(0o600)
    other.write_text("visible\n")
    other.chmod(0o600)
    async with open_cli("serve", "--local", "--home", str(tmp_path / "home"), "--listen", "ws://127.0.0.1:0",
                        "--ws-auth", "capability-token", "--ws-token-file", str(token_file), cwd=tmp_path,
                        env=cli_env()) as cli:
        await cli.wait_for(lambda c: port_of(c.stderr) is not None, STEP)
        port = port_of(cli.stderr)
        assert port is not None
        headers = [(b"Authorization", f"Bearer {TOKEN}".encode())]  # the server still accepts it
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}", extra_headers=headers) as ws:
            with trio.fail_after(STEP):
                client = AppServerClient(WebSocketChannel(ws))
                await client.initialize(name="user")
                started = await client.request("thread/start", {"sandbox": "workspace-write", "cwd": str(workspace)})
                command = f"cat {token_file} > token.txt; cat {other} > other.txt"
                turn = await client.request("turn/start", {"threadId": started["thread"]["id"],
                                                           "input": text_input(f"run: {command}")})
                await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn["turn"]["id"])
        cli.signal(signal.SIGINT)
    assert (workspace / "other.txt").read_text() == "visible\n"  # the command ran and read beside it
    assert (workspace / "token.txt").read_text() == ""
    assert token_file.read_text() == f"{TOKEN}\n"  # the file itself is untouched
