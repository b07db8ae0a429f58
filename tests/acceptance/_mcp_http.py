"""The SDK test MCP server (``tests/fixtures/mcp_server.py``) over Streamable HTTP, as a
subprocess of the test on 127.0.0.1: the URL it serves, and the process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

SERVER = Path(__file__).parent.parent / "fixtures" / "mcp_server.py"


@asynccontextmanager
async def serve_http(*args: str) -> AsyncIterator[tuple[str, trio.Process]]:
    """Start the server with ``--http`` and ``args``; kill it on exit."""
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER), "--http", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = b""
    try:
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive_some(64)
        yield f"http://127.0.0.1:{int(line)}/mcp", process
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
