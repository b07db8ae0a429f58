"""``serve --ws-token-env VAR``: the capability token must not reach the commands the
server's threads run (sec4's review). The variable stayed in the server's environment,
which every command inherits unless its name looks like a secret's (``*TOKEN*``,
``*KEY*``, ...): with a name such as ``WS_CAP`` a sandboxed command read the token --
and with ``Sandbox(network=True)``, or from any process of the user, used it to open an
unconfined thread. The token is the server's alone once read: ``VAR`` is taken out of
the environment the commands get.

Positive control: another variable of the same shape still reaches the command.

FAILS until the lead applies the fix in ``trio_agent/_serve/_command.py`` (sec4's
report): after ``token_from_env(name, os.environ)``, ``os.environ.pop(name, None)``.
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

TOKEN = "capability-in-ws-cap"


async def test_a_command_does_not_see_the_token_variable(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = cli_env(WS_CAP=TOKEN, WS_OTHER="visible")
    async with open_cli("serve", "--local", "--home", str(tmp_path / "home"), "--listen", "ws://127.0.0.1:0",
                        "--ws-auth", "capability-token", "--ws-token-env", "WS_CAP", cwd=tmp_path, env=env) as cli:
        await cli.wait_for(lambda c: port_of(c.stderr) is not None, STEP)
        port = port_of(cli.stderr)
        assert port is not None
        headers = [(b"Authorization", f"Bearer {TOKEN}".encode())]
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}", extra_headers=headers) as ws:
            with trio.fail_after(STEP):
                client = AppServerClient(WebSocketChannel(ws))
                await client.initialize(name="user")
                started = await client.request("thread/start", {"sandbox": "workspace-write", "cwd": str(workspace)})
                command = "printenv WS_CAP > token.txt; printenv WS_OTHER > other.txt"
                turn = await client.request("turn/start", {"threadId": started["thread"]["id"],
                                                           "input": text_input(f"run: {command}")})
                await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn["turn"]["id"])
        cli.signal(signal.SIGINT)
    assert (workspace / "other.txt").read_text() == "visible\n"  # the command ran, with the environment
    assert (workspace / "token.txt").read_text() == ""
