"""``trio-agent run`` as the README installs it (this checkout's console script), pointed at
each third-party server with ``--api-base``: the built-in ``exec`` tool called by the
chat backend edits the workspace (``tools.apply_patch``), its output reaches the backend
as the tool message, and the answer alone is on stdout. Once with ``--transport https``,
once with the default transport (a WebSocket first)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from ..cli._cli import SCRIPT, cli_env, run_cli
from ._chat_backend import ChatBackend, call, say
from ._servers import API_KEY, MODEL, Server

_PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello from the backend\n*** End Patch"
_CODE = f"text(await tools.apply_patch({json.dumps(_PATCH)}));"
_ANSWER = "I wrote hello.txt."


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


async def _run(server: Server, tmp_path: Path, *transport: str) -> subprocess.CompletedProcess[bytes]:
    home = tmp_path / "home"
    workspace = tmp_path / "workspace"
    home.mkdir()
    workspace.mkdir()
    env = cli_env(OPENAI_API_KEY=API_KEY, HOME=str(home), TRIO_AGENT_HOME=str(home / ".trio-agent"))
    # The suite's conftest makes every `trio-agent run` speak OpenAI's dialect to its fake
    # servers; a user's run has no such variable, and gets the profile derived from the host.
    env.pop("TRIO_AGENT_PROFILE", None)
    return await run_cli("run", "--api-base", server.api_base, *transport, "--model", MODEL,
                         "Write hello.txt.", cwd=workspace, env=env, command=SCRIPT, seconds=90)


def _assert_tool_loop(backend: ChatBackend, tmp_path: Path, done: subprocess.CompletedProcess[bytes]) -> None:
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-4000:]
    first, second = backend.requests
    offered = {tool["function"]["name"]: tool["function"] for tool in first.get("tools") or []}
    code = offered["exec"]["parameters"]
    assert list(code["properties"]) == ["code"] and code["properties"]["code"]["type"] == "string", code
    assert (tmp_path / "workspace" / "hello.txt").read_text() == "hello from the backend\n"
    [tool] = [message for message in second["messages"] if message["role"] == "tool"]
    assert "Success. Updated the following files:\nA hello.txt" in _text(tool["content"]), tool
    assert done.stdout.decode() == _ANSWER + "\n"  # stdout: the answer only


async def test_cli_over_https(responses_server: Server, backend: ChatBackend, tmp_path: Path) -> None:
    backend.script(call("exec", {"code": _CODE}), say(_ANSWER))
    done = await _run(responses_server, tmp_path, "--transport", "https")
    _assert_tool_loop(backend, tmp_path, done)


def _fallback_notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "HTTPS" in line and "WebSocket" in line]


async def test_cli_default_transport_falls_back_to_https_once(
    codex_bridge: Server, backend: ChatBackend, tmp_path: Path
) -> None:
    """codex-bridge-python has no WebSocket: the handshake on ``/v1/responses`` is answered
    with an HTTP status."""
    backend.script(call("exec", {"code": _CODE}), say(_ANSWER))
    done = await _run(codex_bridge, tmp_path)
    _assert_tool_loop(backend, tmp_path, done)
    notices = _fallback_notices(done.stderr.decode(errors="replace"))
    assert len(notices) == 1, done.stderr.decode(errors="replace")[-4000:]


async def test_cli_default_transport_keeps_litellms_websocket(
    litellm: Server, backend: ChatBackend, tmp_path: Path
) -> None:
    """LiteLLM 1.106 serves the Responses WebSocket mode on ``/v1/responses`` (its managed
    handler runs each ``response.create`` through the same chat bridge): the handshake is
    a 101, so there is nothing to fall back from, and the tool loop runs on the socket."""
    backend.script(call("exec", {"code": _CODE}), say(_ANSWER))
    done = await _run(litellm, tmp_path)
    _assert_tool_loop(backend, tmp_path, done)
    assert _fallback_notices(done.stderr.decode(errors="replace")) == []
