"""Where rollout files sit in their home: a new file's name, a thread's files, and the
home and thread of a given file (``RolloutConfig.load_file``).

A rollout home holds its sessions as ``<home>/sessions/YYYY/MM/DD/rollout-<local time
YYYY-MM-DDTHH-MM-SS>-<thread id>.jsonl`` -- ours (``new_rollout_path``) and codex's
(``$CODEX_HOME/sessions/...``). A resumed agent appends to the file where it is: its
writer finds the file again by the thread id under the home, so a file can be resumed
only from such a place, and only when it is the file of its thread the home holds
(``RolloutConfig.find``: the newest name). Anything else is refused with
``InvalidSessionSnapshot`` saying what was wrong; nothing is read or written then.
"""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

from .._errors import InvalidSessionSnapshot
from .._ids import session_id_problem

__all__ = ["check_thread_id", "home_of", "new_rollout_path", "rollout_files"]

_NAME = re.compile(r"rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-(?P<id>.+)\.jsonl")
_DAY = re.compile(r"\d{4}|\d{2}")


def check_thread_id(thread_id: str) -> None:
    """``InvalidSessionSnapshot`` unless ``thread_id`` may name a file (it is a session id)."""
    problem = session_id_problem(thread_id)
    if problem is not None:
        raise InvalidSessionSnapshot(
            f"{thread_id!r:.80} is not a valid thread id: {problem}; pass the session id of an agent"
        )


def rollout_files(home: Path, thread_id: str) -> list[Path]:
    """Every rollout file of ``thread_id`` under ``home``, oldest name first."""
    check_thread_id(thread_id)
    sessions = home / "sessions"
    suffix = f"-{thread_id}.jsonl"
    shortest = len("rollout-") + len(suffix)
    found = [
        Path(day, name)
        for day in _subdirectories(str(sessions), depth=3)
        for name in _names(day)
        if name.startswith("rollout-") and name.endswith(suffix) and len(name) >= shortest
    ]
    return sorted(found)


# ``rollout_files`` runs at every agent's start (the writer's ``find`` and its check for
# a rival): it walks the home with ``os.scandir`` and compares names as strings, which
# is what ``sessions.glob("*/*/*/rollout-*-<id>.jsonl")`` did (pathlib's ``*`` also
# matches dot-names, descends into directories and symlinks to them, and skips what it
# may not read) without a ``Path`` and a regex match per entry: with 5,400 rollouts in
# the home, the two globs cost ~15 ms of a cold ``trio-agent run``'s ~250 ms of CPU.


def _names(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return [entry.name for entry in entries]
    except OSError:  # gone, not a directory, not readable: no files of it
        return []


def _subdirectories(directory: str, depth: int) -> list[str]:
    """The directories ``depth`` levels below ``directory`` (``*/*/*`` for 3)."""
    level = [directory]
    for _ in range(depth):
        below: list[str] = []
        for parent in level:
            try:
                with os.scandir(parent) as entries:
                    below += [entry.path for entry in entries if _is_dir(entry)]
            except OSError:
                continue
        level = below
    return level


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def new_rollout_path(home: Path, thread_id: str) -> Path:
    """Where a new rollout of ``thread_id`` goes: today's folder, named after now (local time)."""
    check_thread_id(thread_id)
    now = datetime.datetime.now()
    folder = home / "sessions" / f"{now:%Y}" / f"{now:%m}" / f"{now:%d}"
    return folder / f"rollout-{now:%Y-%m-%dT%H-%M-%S}-{thread_id}.jsonl"


def home_of(path: Path) -> tuple[Path, str]:
    """The rollout home holding ``path`` and the thread id its name carries."""
    where = Path(path).expanduser().resolve()
    match = _NAME.fullmatch(where.name)
    if match is None or session_id_problem(match["id"]) is not None:
        raise InvalidSessionSnapshot(
            f"{str(path)!r:.200} is not named as a rollout file is (rollout-YYYY-MM-DDTHH-MM-SS-<thread id>.jsonl); "
            "pass the file a session was recorded in, or its thread id"
        )
    day = where.parents[:4] if len(where.parents) > 4 else ()  # DD, MM, YYYY, sessions (then the home)
    if not day or day[3].name != "sessions" or not all(_DAY.fullmatch(part.name) for part in day[:3]):
        raise InvalidSessionSnapshot(
            f"{str(path)!r:.200} is not inside a rollout home (<home>/sessions/YYYY/MM/DD/); the session is "
            "continued in its own file, which must stay where its home keeps it"
        )
    if not where.is_file():
        raise InvalidSessionSnapshot(f"{str(path)!r:.200} is not a file; pass an existing rollout file")
    return day[3].parent, match["id"]
