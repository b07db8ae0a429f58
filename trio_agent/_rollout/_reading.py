"""Reading a rollout file: the history it describes (``read_history``; ``read_parsed``
for the session snapshot a load resumes from, ``_durable.load_snapshot``).

Reading takes no lock: a live agent's file reads as far as it is written. What is read
is checked line by line (``_lines.parse``): a torn last line is skipped with a
``RolloutWarning`` issued at the caller of the public entry point (``warn_torn``), damage
before it raises ``InvalidSessionSnapshot``. A load also closes what a process that died
mid-turn left open (``_closing``).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from ._errors import RolloutError, RolloutWarning
from ._lines import Parsed, parse

__all__ = ["read_history", "read_parsed", "warn_torn"]

Item = dict[str, Any]


def read_history(path: Path) -> tuple[dict[str, Any] | None, list[Item]]:
    """The ``session_meta`` payload and the history a rollout file describes, as written.

    ``response_item`` lines append; a ``compacted`` line with ``replacement_history``
    replaces everything before it (as the Codex CLI does on resume). A torn last line
    is skipped with a ``RolloutWarning``; raises ``InvalidSessionSnapshot`` for a
    damaged line before it (not UTF-8 JSON, nested too deep, or not a rollout line of
    the right shape), and ``RolloutError`` when the file cannot be read.
    """
    parsed = read_parsed(path, "skipped it", stacklevel=2)
    return parsed.meta, parsed.history


def read_parsed(path: Path, action: str, *, stacklevel: int) -> Parsed:
    """``path`` parsed; a torn last line is warned about saying ``action``, at the frame
    ``stacklevel`` above the caller of ``read_parsed`` (1: that caller)."""
    try:
        parsed = parse(path, path.read_bytes())
    except OSError as exc:
        raise RolloutError(f"cannot read the rollout {path}: {exc}") from exc
    warn_torn(path, parsed, action, stacklevel=stacklevel + 1)
    return parsed


def warn_torn(path: Path, parsed: Parsed, action: str, *, stacklevel: int) -> None:
    """The ``RolloutWarning`` of a torn last line, if ``parsed`` has one; ``stacklevel``
    counts from the caller of ``warn_torn`` (1)."""
    if parsed.torn:
        message = (f"the rollout {path} ends with a torn line ({parsed.torn} bytes without a newline at byte "
                   f"{parsed.end}: its writer died mid-write, or is writing it now; none of it is committed); "
                   f"{action}")
        warnings.warn(RolloutWarning(message), stacklevel=stacklevel + 1)
