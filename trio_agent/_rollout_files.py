"""Where a rollout file sits in its home, for ``RolloutConfig.load_file``.

A rollout home holds its sessions as ``<home>/sessions/YYYY/MM/DD/rollout-<local time
YYYY-MM-DDTHH-MM-SS>-<thread id>.jsonl`` -- ours (``RolloutConfig.new_path``) and
codex's (``$CODEX_HOME/sessions/...``). A resumed agent appends to the file where it
is: its writer finds the file again by the thread id under the home, so a file can be
resumed only from such a place, and only when it is the file of its thread the home
holds (``RolloutConfig.find``: the newest name). Anything else is refused with
``InvalidSessionSnapshot`` saying what was wrong; nothing is read or written then.
"""

from __future__ import annotations

import re
from pathlib import Path

from ._errors import InvalidSessionSnapshot
from ._ids import session_id_problem

__all__ = ["home_of"]

_NAME = re.compile(r"rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-(?P<id>.+)\.jsonl")
_DAY = re.compile(r"\d{4}|\d{2}")


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
