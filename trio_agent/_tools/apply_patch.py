"""The ``apply_patch`` tool: apply a Codex ``*** Begin Patch`` patch to a workspace.

Theory of operation
-------------------
Applying a patch happens in three phases, and nothing on disk changes until the third:

1. **Parse** (:func:`parse_patch`, pure): patch text becomes an immutable :class:`Patch`.
2. **Plan** (in memory): each path is resolved beneath the workspace root by
   :class:`~._beneath.Beneath`, which holds the root open and follows symlinks in user
   space, one ``*at`` call at a time, never letting the kernel follow one: absolute
   paths, ``..`` above the root and symlinks that lead out of it are refused (the
   message names the link); symlinks that stay inside are followed. The result is a
   canonical path (components from the root, none a symlink). With ``protect_git``
   (the sandbox keeps ``.git`` read-only) a canonical path that writes ``.git`` or the
   git dir a ``.git`` file points to (``_git_guard``) is refused unless it is in
   ``approved_git``. The operations then run in patch order against an overlay of the
   workspace (``_Plan``, keyed on canonical paths), so a later operation sees the result
   of an earlier one.  Update hunks are located like Codex does it:
   an ``@@ header`` moves the search position past the first line equal to the header;
   the hunk's old lines (context + removed) are then searched for in order from that
   position, first exactly, then ignoring trailing whitespace, then ignoring
   surrounding whitespace.  ``*** End of File`` hunks must match at the very end.  A
   hunk with only ``+`` lines is inserted after its ``@@ header`` line if it has one,
   else appended at the end of the file.  Files are split on ``"\\n"`` (or ``"\\r\\n"``
   if that is the file's consistent line ending), a missing final newline is tolerated,
   and every written file ends with a newline.
3. **Commit** (``_patch_commit``): every new file body is first written to a temporary
   file beside its target (keeping the old file's permission bits), then each temporary
   file is renamed into place and deleted files are unlinked. Every directory is opened
   along the canonical path with ``O_NOFOLLOW`` (missing ones made with ``mkdirat``), and
   files are created, renamed and unlinked relative to those descriptors: a directory
   swapped for a symlink after planning (a command of the model's running meanwhile)
   fails the patch with an error instead of sending the write outside the workspace or
   into ``.git``. If staging fails, the temporary files and the directories made for them
   are removed and nothing has changed.

Errors are raised as :class:`PatchError` with a message meant for the model: what went
wrong, and what to do about it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath

import attrs
import trio

from ._beneath import Beneath, Changed, Escape, Parts, TooLarge, TooManyLinks
from ._git_guard import GitGuard
from ._patch_commit import Pending, commit
from ._patch_parse import FileChange, Hunk, Patch, PatchError, parse_patch

__all__ = [
    "MAX_FILE_BYTES",
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
#: The largest file apply_patch reads (to update, move or delete it): the patch is planned
#: in memory, and a command in the sandbox can make a sparse file of any size in an instant.
MAX_FILE_BYTES = 64 << 20
_NORMALIZERS = (lambda s: s, str.rstrip, str.strip)
_commit = commit  # a module global, so a test can step in between planning and committing


async def apply_patch(
    patch_text: str, workspace: Path, *, protect_git: bool = False, protect_state: bool = False,
    approved_git: Collection[str] = (),
) -> str:
    """Trio entry point: checkpoint, then apply the patch synchronously."""
    await trio.lowlevel.checkpoint()
    return apply_patch_to_workspace(patch_text, workspace, protect_git=protect_git, protect_state=protect_state,
                                    approved_git=approved_git)


def apply_patch_to_workspace(
    patch_text: str, workspace: Path, *, protect_git: bool = False, protect_state: bool = False,
    approved_git: Collection[str] = (),
) -> str:
    """Parse, verify and apply ``patch_text`` under ``workspace``; return the summary.

    ``protect_git``: refuse to write ``.git`` (and the git dir a ``.git`` file points to)
    and the agents' state (``.codex``, ``.agents``, the homes), as the sandbox does for
    commands, except the canonical paths in ``approved_git``; ``protect_state``: the
    agents' state only (``writable_git``: the sandbox keeps that read-only still)."""
    patch = parse_patch(patch_text)
    root = Path(workspace)
    if not root.is_dir():
        raise PatchError(f"Workspace {workspace} is not a directory.")
    try:
        fs = Beneath(root)
    except OSError as exc:
        raise PatchError(f"Cannot open the workspace {workspace}: {exc.strerror or exc}.") from exc
    with fs:
        guard = GitGuard(fs, git=protect_git) if protect_git or protect_state else None
        plan = _Plan(fs, guard, frozenset(approved_git))
        summary = [_plan_change(plan, change) for change in patch.changes]
        _commit(fs, plan.pending)
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


def _shown(parts: Parts) -> str:
    return "/".join(parts)


def _within(inner: Parts, outer: Parts) -> bool:
    return inner[: len(outer)] == outer


@attrs.define
class _Plan:
    """An in-memory overlay of the workspace: planned file states over the disk."""

    fs: Beneath
    guard: GitGuard | None
    approved_git: frozenset[str]
    pending: dict[Parts, Pending] = attrs.Factory(dict)

    def lstat(self, parts: Parts, shown: str) -> os.stat_result | None:
        """What is on disk at ``parts`` (None: nothing); a failure is a ``PatchError``."""
        try:
            return self.fs.lstat(parts)
        except OSError as exc:
            raise PatchError(f"Cannot look up {shown}: {exc.strerror or exc}.") from exc

    def exists(self, parts: Parts, shown: str) -> bool:
        entry = self.pending.get(parts)
        if entry is not None:
            return entry.lines is not None
        return self.lstat(parts, shown) is not None

    def read(self, parts: Parts, shown: str, verb: str) -> Pending:
        entry = self.pending.get(parts)
        if entry is not None and entry.lines is not None:
            return entry
        status = None if entry is not None else self.lstat(parts, shown)
        if status is None:
            hint = f" Use '*** Add File: {shown}' to create it." if verb == "update" else ""
            raise PatchError(f"Cannot {verb} {shown}: file does not exist.{hint}")
        if not stat.S_ISREG(status.st_mode):
            raise PatchError(f"Cannot {verb} {shown}: it is not a regular file.")
        return _read_disk(self.fs, parts, shown, verb)

    def writable(self, parts: Parts, shown: str) -> Parts:
        """``parts``, unless writing it writes a protected place (``.git``, ``.codex``, ...)."""
        canonical = _shown(parts)
        kept = None if self.guard is None or canonical in self.approved_git else self.guard.kept(parts)
        if kept is None:
            return parts
        where = shown if canonical == os.path.normpath(shown) else f"{shown} (it resolves to {canonical})"
        raise PatchError(
            f"Refusing to write {where}: the sandbox keeps {kept} read-only, and this patch was not "
            "approved to change it. No file was changed."
        )


def _read_disk(fs: Beneath, parts: Parts, shown: str, verb: str) -> Pending:
    try:
        data, status = fs.read_bytes(parts, limit=MAX_FILE_BYTES)
    except TooLarge as exc:
        raise PatchError(
            f"Cannot {verb} {shown}: it is {exc.size} bytes, and apply_patch edits files of at most "
            f"{MAX_FILE_BYTES >> 20} MiB; change it with a command instead. No file was changed."
        ) from None
    except (OSError, Changed) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise PatchError(f"Cannot read {shown}: {why}.") from exc
    text = data.decode("utf-8", "surrogateescape")
    crlf = text.count("\r\n")
    newline = "\r\n" if crlf and crlf == text.count("\n") else "\n"
    lines = text.split(newline)
    if lines[-1] == "":
        lines.pop()
    return Pending(tuple(lines), newline, status.st_mode & 0o7777)


def _plan_change(plan: _Plan, change: FileChange) -> tuple[str, str]:
    """Record ``change`` in ``plan``; return its summary entry (letter, path)."""
    real = _resolve(change.path, plan.fs)
    if change.kind == "add":
        if plan.exists(real, change.path):
            raise PatchError(
                f"Cannot add {change.path}: file already exists. Use "
                f"'*** Update File: {change.path}' to change it, or delete it first."
            )
        _check_creatable(plan, real, change.path)
        plan.pending[plan.writable(real, change.path)] = Pending(change.new_lines)
        return "A", change.path
    current = plan.read(real, change.path, change.kind)
    if change.kind == "delete":
        link = plan.writable(_resolve(change.path, plan.fs, follow_final=False), change.path)
        plan.pending[real] = Pending(None, unlink_at=link)
        return "D", change.path
    new_lines = tuple(apply_hunks(current.lines or (), change.hunks, change.path))
    updated = attrs.evolve(current, lines=new_lines)
    if change.move_to is None:
        plan.pending[plan.writable(real, change.path)] = updated
        return "M", change.path
    dest = _resolve(change.move_to, plan.fs)
    if dest != real:
        _check_move_target(plan, dest, change.move_to)
        link = plan.writable(_resolve(change.path, plan.fs, follow_final=False), change.path)
        plan.pending[real] = Pending(None, unlink_at=link)
    plan.pending[plan.writable(dest, change.move_to)] = updated
    return "M", change.move_to


def _check_move_target(plan: _Plan, dest: Parts, shown: str) -> None:
    status = plan.lstat(dest, shown)
    if status is not None and stat.S_ISDIR(status.st_mode) and dest not in plan.pending:
        raise PatchError(f"Cannot move to {shown}: it is a directory.")
    _check_creatable(plan, dest, shown)


def _check_creatable(plan: _Plan, real: Parts, shown: str) -> None:
    """Refuse to create ``real`` below a file, or above a file created by this patch."""
    parent = real[:-1]
    while parent:
        status = plan.lstat(parent, shown)
        if status is not None:
            if stat.S_ISLNK(status.st_mode):  # it was a directory when resolved a moment ago
                raise PatchError(f"Cannot create {shown}: {Changed(parent, 'a symlink')}.")
            if not stat.S_ISDIR(status.st_mode):
                raise PatchError(f"Cannot create {shown}: {_shown(parent)} is a file, not a directory.")
            break
        parent = parent[:-1]
    for other, entry in plan.pending.items():
        clash = _within(other, real) or _within(real, other)
        if entry.lines is not None and other != real and clash:
            raise PatchError(f"Cannot create {shown}: it conflicts with {_shown(other)} in this patch.")


def _resolve(raw: str, fs: Beneath, *, follow_final: bool = True) -> Parts:
    """Resolve a patch path beneath the workspace, refusing anything that escapes it.

    ``..`` in the patch path is lexical (``a/../b`` is ``b``), as in git; in a symlink's
    target it is the link directory's parent. With ``follow_final=False`` the last
    component is the entry itself (to unlink a symlink, not its target)."""
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
        parts = () if norm == os.curdir else fs.resolve(norm, follow_final=follow_final)
    except Escape as exc:
        link = "" if exc.link is None else f" through the symlink {exc.link} -> {exc.target}"
        raise PatchError(
            f"Refusing path {raw!r}: it resolves outside the workspace{link}. "
            "Only files inside the workspace can be changed."
        ) from None
    except (TooManyLinks, OSError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise PatchError(f"Cannot resolve path {raw!r}: {why}.") from exc
    if not parts:
        raise PatchError(f"Refusing path {raw!r}: it names the workspace root, not a file.")
    return parts
