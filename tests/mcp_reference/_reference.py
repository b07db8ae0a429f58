"""The reference MCP server, ``@modelcontextprotocol/server-everything``, pinned in
``server/package.json`` (and its lock file) and installed by ``bash .ci/mcp``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

__all__ = ["ENTRY", "VERSION", "missing", "node"]

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
