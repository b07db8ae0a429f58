"""Where the outside clients live (installed by ``.ci/clients``, pinned): the real codex
CLI (its TUI, ``codex exec --remote``), the official TypeScript SDK
(``@openai/codex-sdk``, run with node) and the official Python SDK (``openai-codex``,
installed into this virtualenv). Tests here drive trio-agent with them, unmodified."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

__all__ = ["CLIENTS", "CODEX_VERSION", "NODE_MODULES", "codex_binary", "missing", "node", "ts_sdk"]

CLIENTS = Path(__file__).resolve().parent / "clients"
NODE_MODULES = CLIENTS / "node_modules"
#: Pinned in clients/package.json (the codex CLI) and .ci/clients (the Python SDK).
CODEX_VERSION = "0.171.0"
_NATIVE = "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"


def codex_binary() -> Path:
    """The native codex CLI binary of the pinned ``@openai/codex``."""
    return NODE_MODULES / _NATIVE


def ts_sdk() -> Path:
    """The ``@openai/codex-sdk`` package directory."""
    return NODE_MODULES / "@openai" / "codex-sdk"


def node() -> str | None:
    return shutil.which("node")


def missing() -> list[str]:
    """What of the outside clients is not installed here (empty: all are)."""
    gaps = []
    if not codex_binary().is_file():
        gaps.append(f"the codex CLI ({codex_binary()})")
    if not ts_sdk().is_dir() or node() is None:
        gaps.append("the TypeScript SDK and node")
    if importlib.util.find_spec("openai_codex") is None:
        gaps.append("the Python SDK (openai-codex)")
    if shutil.which("tmux") is None:
        gaps.append("tmux (for the codex TUI)")
    return gaps
