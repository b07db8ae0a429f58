"""The ``apply_patch`` tool: apply a Codex ``*** Begin Patch`` patch to a workspace.

Theory of operation
-------------------
Applying a patch happens in three phases, and nothing on disk changes until the third:

1. **Parse** (:func:`parse_patch`, pure): patch text becomes an immutable :class:`Patch`.
2. **Plan** (in memory): each path is resolved against the workspace root.  Absolute
   paths, and paths that leave the workspace lexically (``..``) or through a symlink
   (checked with :meth:`pathlib.Path.resolve`), are refused.  The operations then run
   in patch order against an overlay of the workspace (``_Plan``), so a later operation
   sees the result of an earlier one.  Update hunks are located like Codex does it:
   an ``@@ header`` moves the search position past the first line equal to the header;
   the hunk's old lines (context + removed) are then searched for in order from that
   position, first exactly, then ignoring trailing whitespace, then ignoring
   surrounding whitespace.  ``*** End of File`` hunks must match at the very end.  A
   hunk with only ``+`` lines is inserted after its ``@@ header`` line if it has one,
   else appended at the end of the file.  Files are split on ``"\\n"`` (or ``"\\r\\n"``
   if that is the file's consistent line ending), a missing final newline is tolerated,
   and every written file ends with a newline.
3. **Commit**: every new file body is first written to a temporary file next to its
   target (keeping the old file's permission bits), then each temporary file is moved
   into place with :func:`os.replace` and deleted files are unlinked.  If staging fails,
   the temporary files are removed and nothing has changed.

Errors are raised as :class:`PatchError` with a message meant for the model: what went
wrong, and what to do about it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath

import attrs
import trio

from ._patch_parse import FileChange, Hunk, Patch, PatchError, parse_patch

__all__ = [
    "FileChange",
    "Hunk",
    "Patch",
    "PatchError",
    "apply_hunks",
    "apply_patch",
    "apply_patch_to_workspace",
    "parse_patch",
]

SUCCESS_HEADER = "Success. Updated the following files:\n"
_NORMALIZERS = (lambda s: s, str.rstrip, str.strip)


async def apply_patch(patch_text: str, workspace: Path) -> str:
    """Trio entry point: checkpoint, then apply the patch synchronously."""
    await trio.lowlevel.checkpoint()
    return apply_patch_to_workspace(patch_text, workspace)


def apply_patch_to_workspace(patch_text: str, workspace: Path) -> str:
    """Parse, verify and apply ``patch_text`` under ``workspace``; return the summary."""
    patch = parse_patch(patch_text)
    root = Path(workspace).resolve()
    if not root.is_dir():
        raise PatchError(f"Workspace {workspace} is not a directory.")
    plan = _Plan(root)
    summary = [_plan_change(plan, change) for change in patch.changes]
    _commit(plan)
    body = "".join(f"{kind} {path}\n" for letter in "AMD" for kind, path in summary if kind == letter)
    return SUCCESS_HEADER + body


# --------------------------------------------------------------------------- matching


def apply_hunks(lines: Sequence[str], hunks: Sequence[Hunk], path: str) -> list[str]:
    """Return ``lines`` with ``hunks`` applied (pure); ``path`` is only used in errors."""
    replacements: list[tuple[int, int, int, tuple[str, ...]]] = []
    pos = 0
    for number, hunk in enumerate(hunks, 1):
        start, length, new, pos = _locate(lines, hunk, pos, path, number)
        replacements.append((start, number, length, new))
    result = list(lines)
    for start, _number, length, new in sorted(replacements, reverse=True):
        result[start : start + length] = new
    return result


def _locate(
    lines: Sequence[str], hunk: Hunk, pos: int, path: str, number: int
) -> tuple[int, int, tuple[str, ...], int]:
    """Find where ``hunk`` applies: (start, old length, new lines, next search start)."""
    if hunk.header is not None:
        found = _seek(lines, (hunk.header,), pos, eof=False)
        if found is None:
            raise PatchError(
                f"Failed to find context '@@ {hunk.header}' in {path} (hunk {number}). "
                "The text after '@@' must equal a whole line of the file (such as a def "
                "or class line) that comes after the previous hunk."
            )
        pos = found + 1
    old, new = hunk.old_lines, hunk.new_lines
    if not old:  # pure insertion; like Codex, it does not move the search position
        return (pos if hunk.header is not None else len(lines)), 0, new, pos
    found = _seek(lines, old, pos, hunk.end_of_file)
    if found is None and old[-1] == "":
        # Blank lines that merely separate hunks in the patch need not exist in the file.
        old = old[:-1]
        new = new[:-1] if new and new[-1] == "" else new
        found = _seek(lines, old, pos, hunk.end_of_file)
    if found is None:
        raise _mismatch(hunk, path, number)
    return found, len(old), new, found + len(old)


def _seek(lines: Sequence[str], pattern: Sequence[str], start: int, eof: bool) -> int | None:
    """Index of ``pattern`` in ``lines`` at or after ``start`` (only at the end if eof)."""
    if not pattern:
        return start
    last = len(lines) - len(pattern)
    if last < start:
        return None
    candidates = range(last, last + 1) if eof else range(start, last + 1)
    for norm in _NORMALIZERS:
        want = [norm(p) for p in pattern]
        for i in candidates:
            if all(norm(lines[i + k]) == w for k, w in enumerate(want)):
                return i
    return None


def _mismatch(hunk: Hunk, path: str, number: int) -> PatchError:
    where = " at the end of the file" if hunk.end_of_file else ""
    after = " after the previous hunk" if number > 1 else ""
    expected = "\n".join(hunk.old_lines)
    return PatchError(
        f"Failed to find expected lines in {path} (hunk {number}):\n{expected}\n"
        f"These context (' ') and removed ('-') lines must appear in the file in this "
        f"order{where}{after}. Re-read {path} and retry with lines copied exactly."
    )


# --------------------------------------------------------------------------- planning


@attrs.define
class _Pending:
    """The planned final state of one file; ``lines is None`` means deleted."""

    lines: tuple[str, ...] | None
    newline: str = "\n"
    mode: int | None = None
    unlink_at: Path | None = None


@attrs.define
class _Plan:
    """An in-memory overlay of the workspace: planned file states over the disk."""

    root: Path
    pending: dict[Path, _Pending] = attrs.Factory(dict)

    def exists(self, real: Path) -> bool:
        entry = self.pending.get(real)
        if entry is not None:
            return entry.lines is not None
        return real.exists() or real.is_symlink()

    def read(self, real: Path, shown: str, verb: str) -> _Pending:
        entry = self.pending.get(real)
        if entry is not None and entry.lines is not None:
            return entry
        if entry is not None or not real.exists():
            hint = f" Use '*** Add File: {shown}' to create it." if verb == "update" else ""
            raise PatchError(f"Cannot {verb} {shown}: file does not exist.{hint}")
        if not real.is_file():
            raise PatchError(f"Cannot {verb} {shown}: it is not a regular file.")
        return _read_disk(real, shown)


def _read_disk(real: Path, shown: str) -> _Pending:
    try:
        data = real.read_bytes()
        mode = real.stat().st_mode & 0o7777
    except OSError as exc:
        raise PatchError(f"Cannot read {shown}: {exc.strerror or exc}.") from exc
    text = data.decode("utf-8", "surrogateescape")
    crlf = text.count("\r\n")
    newline = "\r\n" if crlf and crlf == text.count("\n") else "\n"
    lines = text.split(newline)
    if lines[-1] == "":
        lines.pop()
    return _Pending(tuple(lines), newline, mode)


def _plan_change(plan: _Plan, change: FileChange) -> tuple[str, str]:
    """Record ``change`` in ``plan``; return its summary entry (letter, path)."""
    real = _resolve(change.path, plan.root)
    if change.kind == "add":
        if plan.exists(real):
            raise PatchError(
                f"Cannot add {change.path}: file already exists. Use "
                f"'*** Update File: {change.path}' to change it, or delete it first."
            )
        _check_creatable(plan, real, change.path)
        plan.pending[real] = _Pending(change.new_lines)
        return "A", change.path
    current = plan.read(real, change.path, change.kind)
    if change.kind == "delete":
        plan.pending[real] = _Pending(None, unlink_at=_link_path(change.path, plan.root))
        return "D", change.path
    new_lines = tuple(apply_hunks(current.lines or (), change.hunks, change.path))
    updated = attrs.evolve(current, lines=new_lines)
    if change.move_to is None:
        plan.pending[real] = updated
        return "M", change.path
    dest = _resolve(change.move_to, plan.root)
    if dest != real:
        _check_move_target(plan, dest, change.move_to)
        plan.pending[real] = _Pending(None, unlink_at=_link_path(change.path, plan.root))
    plan.pending[dest] = updated
    return "M", change.move_to


def _check_move_target(plan: _Plan, dest: Path, shown: str) -> None:
    if dest.is_dir() and dest not in plan.pending:
        raise PatchError(f"Cannot move to {shown}: it is a directory.")
    _check_creatable(plan, dest, shown)


def _check_creatable(plan: _Plan, real: Path, shown: str) -> None:
    """Refuse to create ``real`` below a file, or above a file created by this patch."""
    parent = real.parent
    while not parent.exists() and parent != plan.root:
        parent = parent.parent
    if not parent.is_dir():
        where = parent.relative_to(plan.root)
        raise PatchError(f"Cannot create {shown}: {where} is a file, not a directory.")
    for other, entry in plan.pending.items():
        clash = other.is_relative_to(real) or real.is_relative_to(other)
        if entry.lines is not None and other != real and clash:
            where = other.relative_to(plan.root)
            raise PatchError(f"Cannot create {shown}: it conflicts with {where} in this patch.")


def _resolve(raw: str, root: Path) -> Path:
    """Resolve a patch path inside ``root``, refusing anything that escapes it."""
    if "\x00" in raw or any(ord(char) < 0x20 for char in raw):
        raise PatchError(
            f"Refusing path {raw!r}: it contains a NUL or control character. "
            "Use a plain relative path such as src/app.py."
        )
    try:
        os.fsencode(raw)
    except UnicodeEncodeError:
        raise PatchError(
            f"Refusing path {raw!r}: it cannot be encoded as a file name on this system."
        ) from None
    if PurePosixPath(raw).anchor or PureWindowsPath(raw).anchor:
        raise PatchError(
            f"Refusing path {raw!r}: absolute paths are not allowed. "
            "Use a path relative to the workspace root."
        )
    norm = os.path.normpath(raw)
    try:
        real = (root / norm).resolve()
    except (OSError, RuntimeError) as exc:
        raise PatchError(f"Cannot resolve path {raw!r}: {exc}.") from exc
    if norm == os.curdir or real == root:
        raise PatchError(f"Refusing path {raw!r}: it names the workspace root, not a file.")
    if norm.split(os.sep)[0] == os.pardir or not real.is_relative_to(root):
        raise PatchError(
            f"Refusing path {raw!r}: it resolves outside the workspace. "
            "Only files inside the workspace can be changed."
        )
    return real


def _link_path(raw: str, root: Path) -> Path:
    """The directory entry to unlink: resolved parent plus the literal final name."""
    lexical = root / os.path.normpath(raw)
    return lexical.parent.resolve() / lexical.name


# --------------------------------------------------------------------------- commit


def _encode(entry: _Pending, shown: Path) -> bytes:
    lines = entry.lines or ()
    text = "".join(line + entry.newline for line in lines)
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise PatchError(f"Cannot write {shown}: the new content is not encodable.") from exc


def _commit(plan: _Plan) -> None:
    """Stage every write as a temp file, then move them into place and unlink deletions."""
    writes = [
        (real, _encode(entry, real.relative_to(plan.root)), entry.mode)
        for real, entry in plan.pending.items()
        if entry.lines is not None
    ]
    staged: list[tuple[Path, Path]] = []
    try:
        for real, data, mode in writes:
            staged.append((_stage(real, data, mode), real))
    except OSError as exc:
        _discard(staged)
        raise PatchError(f"Failed to write files: {exc}. No files were changed.") from exc
    try:
        for tmp, real in staged:
            os.replace(tmp, real)
        for entry in plan.pending.values():
            if entry.lines is None and entry.unlink_at is not None:
                entry.unlink_at.unlink(missing_ok=True)
    except OSError as exc:
        _discard(staged)
        raise PatchError(
            f"Failed while applying the patch: {exc}. Some files may already have "
            "changed; re-read them before retrying."
        ) from exc


def _stage(real: Path, data: bytes, mode: int | None) -> Path:
    """Write ``data`` to a new temp file beside ``real``; return the temp path."""
    real.parent.mkdir(parents=True, exist_ok=True)
    tmp = real.with_name(f".{real.name}.{secrets.token_hex(4)}.apply_patch.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _discard(staged: Sequence[tuple[Path, Path]]) -> None:
    for tmp, _real in staged:
        tmp.unlink(missing_ok=True)
