"""Where the pinned reference MCP server is, and how to run it over Streamable HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import trio

SERVERS = Path(__file__).parent / "servers"
PACKAGE = SERVERS / "node_modules" / "@modelcontextprotocol" / "server-everything"
ENTRY = PACKAGE / "dist" / "index.js"


def pinned_version() -> str:
    lock = json.loads((SERVERS / "package.json").read_text())
    return str(lock["dependencies"]["@modelcontextprotocol/server-everything"])


def missing() -> bool:
    """Whether node or the pinned server is missing (``bash .ci/mcp_servers``)."""
    if shutil.which("node") is None or not ENTRY.is_file():
        return True
    installed = json.loads((PACKAGE / "package.json").read_text()).get("version")
    return bool(installed != pinned_version())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def everything_http() -> AsyncIterator[str]:
    """The reference server over Streamable HTTP (a subprocess of the test): its URL,
    once it says it listens."""
    port = _free_port()
    node = shutil.which("node")
    assert node is not None
    process = await trio.lowlevel.open_process(
        [node, str(ENTRY), "streamableHttp"], env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    try:
        said = b""
        with trio.fail_after(30):
            while b"listening on port" not in said:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, f"the reference server exited: {said.decode(errors='replace')}"
                said += chunk
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
