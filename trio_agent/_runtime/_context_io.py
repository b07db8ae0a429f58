"""Gather what the first-turn context message needs from the machine.

``AGENTS.md`` discovery (SPEC sec. 2, nanocodex sec. 4.3): from the git root (the
nearest ancestor with ``.git``, else the workspace itself) down to the workspace, the
first of ``AGENTS.override.md`` / ``AGENTS.md`` in each directory, joined with blank
lines and capped at 32 KiB in total. Files are small and read synchronously once per
session (and again when compaction rebuilds context).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from .._session.context import environment_message

__all__ = ["AGENTS_MD_CAP", "agents_md_fingerprint", "context_user_message", "load_agents_md", "today"]

AGENTS_MD_CAP = 32 * 1024
_NAMES = ("AGENTS.override.md", "AGENTS.md")


def _git_root(workspace: Path) -> Path:
    for directory in (workspace, *workspace.parents):
        if (directory / ".git").exists():
            return directory
    return workspace


def load_agents_md(workspace: Path) -> str | None:
    """The project instructions for ``workspace``, or None when there are none."""
    root = _git_root(workspace)
    chain = [workspace, *workspace.parents]
    directories = list(reversed(chain[: chain.index(root) + 1]))
    parts: list[str] = []
    budget = AGENTS_MD_CAP
    for directory in directories:
        for name in _NAMES:
            path = directory / name
            if not path.is_file():
                continue
            data = path.read_bytes()[:budget]
            text = data.decode("utf-8", "replace").strip()
            if text:
                parts.append(text)
                budget -= len(data)
            break
        if budget <= 0:
            break
    return "\n\n".join(parts) or None


def agents_md_fingerprint(workspace: Path) -> tuple[object, ...]:
    """What :func:`load_agents_md`'s answer depends on, by ``stat`` alone: for each
    directory from the workspace up to the git root (or ``/``), whether it holds ``.git``
    and the identity, size and modification time of each candidate file. Equal
    fingerprints: the same answer (short of a same-size rewrite within one mtime tick).
    A few ``stat`` calls, against reading the files again."""
    parts: list[object] = []
    for directory in (workspace, *workspace.parents):
        is_root = (directory / ".git").exists()
        parts.append(is_root)
        for name in _NAMES:
            try:
                info = os.stat(directory / name)
            except OSError:
                parts.append(None)
                continue
            parts.append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode))
        if is_root:
            break
    return tuple(parts)


def _timezone() -> str:
    tz = os.environ.get("TZ")
    if tz:
        return tz.lstrip(":")
    try:
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    try:
        return Path("/etc/timezone").read_text().strip() or "UTC"
    except OSError:
        return "UTC"


def _shell_name() -> str:
    shell = os.environ.get("SHELL") or "bash"
    return os.path.basename(shell) or "bash"


def today() -> str:
    """The current date as the context message states it."""
    return datetime.date.today().isoformat()


def context_user_message(workspace: Path, *, current_date: str | None = None) -> dict[str, Any]:
    return environment_message(
        cwd=str(workspace),
        shell=_shell_name(),
        current_date=current_date or today(),
        timezone=_timezone(),
        agents_md=load_agents_md(workspace),
    )
