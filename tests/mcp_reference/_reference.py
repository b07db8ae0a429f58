"""The reference MCP server, ``@modelcontextprotocol/server-everything``, pinned in
``server/package.json`` (and its lock file) and installed by ``bash .ci/mcp``."""

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

__all__ = ["ENTRY", "VERSION", "everything_http", "missing", "node"]

SERVER = Path(__file__).resolve().parent / "server"
PACKAGE = SERVER / "node_modules" / "@modelcontextprotocol" / "server-everything"
ENTRY = PACKAGE / "dist" / "index.js"
VERSION = json.loads((SERVER / "package.json").read_text())["dependencies"]["@modelcontextprotocol/server-everything"]


def node() -> str | None:
    return shutil.which("node")


def missing() -> list[str]:
    """What of the reference server is not installed here (empty: it is)."""
    gaps = []
    if node() is None:
        gaps.append("node")
    if not ENTRY.is_file():
        gaps.append(f"@modelcontextprotocol/server-everything {VERSION} ({ENTRY}; bash .ci/mcp)")
    elif json.loads((PACKAGE / "package.json").read_text())["version"] != VERSION:
        gaps.append(f"@modelcontextprotocol/server-everything at the pinned {VERSION} (bash .ci/mcp)")
    return gaps


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
