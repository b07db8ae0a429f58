"""Parser for the Codex ``*** Begin Patch`` format used by the ``apply_patch`` tool.

Theory of operation
-------------------
Parsing is pure: :func:`parse_patch` turns patch text into an immutable :class:`Patch`
without touching the filesystem.  The text is split on ``"\\n"`` (a trailing ``"\\r"`` is
dropped from every line), surrounding blank lines are ignored, and an optional heredoc
wrapper (``<<'EOF'`` ... ``EOF``) is peeled off.  The first remaining line must be
``*** Begin Patch`` and the last ``*** End Patch``.

Between the markers a small cursor walks the lines, one file operation at a time:

* ``*** Add File: <path>`` followed by ``+`` lines (the new file's contents);
* ``*** Delete File: <path>`` with no body;
* ``*** Update File: <path>``, optionally ``*** Move to: <path>``, then one or more hunks.
  A hunk starts with ``@@`` (optionally ``@@ <context header>``; the very first hunk may
  omit it) and holds ``" "`` context, ``"-"`` removed and ``"+"`` added lines; an empty
  line counts as an empty context line.  ``*** End of File`` after a hunk anchors it at
  the end of the file.

Every error is a :class:`PatchError` whose message names the 1-based line number, what
was wrong, and what the caller should do instead.
"""

from __future__ import annotations

import re
from typing import Literal

import attrs

__all__ = ["FileChange", "Hunk", "Patch", "PatchError", "parse_patch"]

BEGIN_PATCH = "*** Begin Patch"
END_PATCH = "*** End Patch"
ADD_FILE = "*** Add File: "
DELETE_FILE = "*** Delete File: "
UPDATE_FILE = "*** Update File: "
MOVE_TO = "*** Move to: "
END_OF_FILE = "*** End of File"

_HEREDOC_START = re.compile(r"^(?:apply_patch\s+)?<<-?\s*(['\"]?)([A-Za-z_]\w*)\1$")
# A unified-diff range ("@@ -1,3 +1,4 @@") carries no usable context; treat it as bare "@@".
_UNIFIED_RANGE = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_FILE_OP_HINT = (
    "Each file operation must start with '*** Add File: <path>', "
    "'*** Delete File: <path>' or '*** Update File: <path>'."
)
_HUNK_LINE_HINT = (
    "Every hunk line must start with ' ' (context), '-' (removed) or '+' (added); "
    "start a new hunk with '@@'."
)


class PatchError(Exception):
    """A patch could not be parsed or applied; the message says why and what to do."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        if line is not None:
            message = f"Invalid patch at line {line}: {message}"
        super().__init__(message)
        self.line = line


@attrs.frozen
class Hunk:
    """One ``@@`` block of an Update File operation."""

    header: str | None
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]
    end_of_file: bool = False


@attrs.frozen
class FileChange:
    """One file operation.  ``new_lines`` is used by "add", ``hunks`` by "update"."""

    kind: Literal["add", "delete", "update"]
    path: str
    move_to: str | None = None
    new_lines: tuple[str, ...] = ()
    hunks: tuple[Hunk, ...] = ()


@attrs.frozen
class Patch:
    changes: tuple[FileChange, ...]


def parse_patch(text: str) -> Patch:
    """Parse Codex patch text into a :class:`Patch`.  Pure; raises :class:`PatchError`."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    first, last = _envelope(lines)
    changes: list[FileChange] = []
    i = first + 1
    while i < last:
        if not lines[i].strip():
            i += 1
            continue
        change, i = _parse_file_op(lines, i, last)
        changes.append(change)
    if not changes:
        raise PatchError(
            f"the patch contains no file operations. {_FILE_OP_HINT}", line=last + 1
        )
    return Patch(tuple(changes))


def _nonblank_bounds(lines: list[str], lo: int, hi: int) -> tuple[int, int] | None:
    idx = [i for i in range(lo, hi) if lines[i].strip()]
    return (idx[0], idx[-1]) if idx else None


def _envelope(lines: list[str]) -> tuple[int, int]:
    """Return the indices of the Begin and End marker lines."""
    bounds = _nonblank_bounds(lines, 0, len(lines))
    if bounds is None:
        raise PatchError(
            f"The patch is empty. Send '{BEGIN_PATCH}', file operations, then '{END_PATCH}'."
        )
    first, last = bounds
    heredoc = _HEREDOC_START.match(lines[first].strip())
    if heredoc and last > first and lines[last].strip() == heredoc.group(2):
        inner = _nonblank_bounds(lines, first + 1, last)
        if inner is None:
            raise PatchError("the heredoc contains no patch", line=first + 1)
        first, last = inner
    if lines[first].strip() != BEGIN_PATCH:
        raise PatchError(
            f"the first line of the patch must be '{BEGIN_PATCH}', got {lines[first]!r}",
            line=first + 1,
        )
    if last == first or lines[last].strip() != END_PATCH:
        raise PatchError(
            f"the last line of the patch must be '{END_PATCH}', got {lines[last]!r}",
            line=last + 1,
        )
    return first, last


def _header_path(header: str, prefix: str, i: int) -> str:
    path = header[len(prefix.rstrip()) :].strip()
    if not path:
        raise PatchError(f"'{prefix.strip()}' needs a file path", line=i + 1)
    return path


def _parse_file_op(lines: list[str], i: int, end: int) -> tuple[FileChange, int]:
    header = lines[i].strip()
    if header.startswith(ADD_FILE.rstrip()):
        path = _header_path(header, ADD_FILE, i)
        j = i + 1
        while j < end and lines[j].startswith("+"):
            j += 1
        added = tuple(line[1:] for line in lines[i + 1 : j])
        return FileChange("add", path, new_lines=added), j
    if header.startswith(DELETE_FILE.rstrip()):
        return FileChange("delete", _header_path(header, DELETE_FILE, i)), i + 1
    if header.startswith(UPDATE_FILE.rstrip()):
        return _parse_update(lines, i, end)
    raise PatchError(
        f"expected a file operation or '{END_PATCH}', got {lines[i]!r}. {_FILE_OP_HINT} "
        "Every line of an added file must start with '+'.",
        line=i + 1,
    )


def _parse_update(lines: list[str], i: int, end: int) -> tuple[FileChange, int]:
    path = _header_path(lines[i].strip(), UPDATE_FILE, i)
    j = i + 1
    move_to: str | None = None
    if j < end and lines[j].strip().startswith(MOVE_TO.rstrip()):
        move_to = _header_path(lines[j].strip(), MOVE_TO, j)
        j += 1
    hunks: list[Hunk] = []
    while j < end:
        if not lines[j].strip():
            j += 1
            continue
        if lines[j].startswith("***"):
            break
        hunk, j = _parse_hunk(lines, j, end, first=not hunks)
        hunks.append(hunk)
    if not hunks:
        raise PatchError(
            f"'*** Update File: {path}' has no hunks. Add at least one '@@' hunk with "
            "' ', '-' or '+' lines, or use '*** Delete File:' / '*** Add File:'.",
            line=i + 1,
        )
    return FileChange("update", path, move_to=move_to, hunks=tuple(hunks)), j


def _parse_header(line: str) -> str | None:
    header = line[3:] if line.startswith("@@ ") else line[2:]
    if not header.strip() or _UNIFIED_RANGE.match(header.strip()):
        return None
    return header


def _parse_hunk(lines: list[str], i: int, end: int, *, first: bool) -> tuple[Hunk, int]:
    start = i
    header: str | None = None
    if lines[i].startswith("@@"):
        header = _parse_header(lines[i])
        i += 1
    elif not first:
        raise PatchError(f"unexpected line {lines[i]!r}. {_HUNK_LINE_HINT}", line=i + 1)
    old: list[str] = []
    new: list[str] = []
    eof = False
    while i < end:
        line = lines[i]
        if line.rstrip() == END_OF_FILE and (old or new):
            eof, i = True, i + 1
            break
        if line[:1] not in ("", " ", "-", "+"):
            break
        if line[:1] != "+":
            old.append(line[1:])
        if line[:1] != "-":
            new.append(line[1:])
        i += 1
    if not old and not new:
        if i < end and lines[i].strip() and not lines[i].startswith(("@@", "***")):
            raise PatchError(f"unexpected line {lines[i]!r}. {_HUNK_LINE_HINT}", line=i + 1)
        raise PatchError(f"hunk has no lines. {_HUNK_LINE_HINT}", line=start + 1)
    return Hunk(header, tuple(old), tuple(new), eof), i
