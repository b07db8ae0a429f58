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

from ..._bounded_read import read_regular_prefix
from ..._session.context import environment_message

__all__ = ["AGENTS_MD_CAP", "agents_md_fingerprint", "agents_md_watch", "context_user_message", "load_agents_md",
           "today"]

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
            data = read_regular_prefix(directory / name, budget)
            if data is None:
                continue
            text = data.decode("utf-8", "replace").strip()
            if text:
                parts.append(text)
                budget -= len(data)
            break
        if budget <= 0:
            break
    return "\n\n".join(parts) or None


def agents_md_watch(workspace: Path) -> tuple[str, ...]:
    """The paths whose ``stat`` tells whether :func:`load_agents_md`'s answer may have
    changed: every directory from the workspace up to its git root (up to ``/`` without
    one: a ``.git`` made later moves the root) -- a file added, removed or renamed there,
    an ``AGENTS.md`` or a ``.git``, changes the directory's modification time -- and
    every candidate file that exists now (a rewrite in place changes its own)."""
    paths: list[str] = []
    for directory in (workspace, *workspace.parents):
        paths.append(str(directory))
        paths.extend(str(directory / name) for name in _NAMES if (directory / name).exists())
        if (directory / ".git").exists():
            break
    return tuple(paths)


def agents_md_fingerprint(paths: tuple[str, ...]) -> tuple[object, ...]:
    """The ``stat`` identity of each of :func:`agents_md_watch`'s paths: equal
    fingerprints, the same AGENTS.md answer (short of a same-size rewrite within one
    mtime tick). Only directories and files that existed are asked: no exception on the
    usual path, a few microseconds."""
    parts: list[object] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            parts.append(None)
            continue
        parts.append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns))
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
