"""Where a patch may not write while ``.git`` is kept read-only (issue 21, hole 5).

Theory of operation
-------------------
The sandbox keeps ``.git`` read-only for commands (``_sandbox.protected_paths``: the
workspace's ``.git`` and the git dir a ``.git`` file points to), because a write there
is code execution on the user's next git command (``core.fsmonitor``, hooks). A patch
path is decided on what it *resolves to* (:class:`~._beneath.Beneath`), not on how it
is spelled: with ``g -> .git``, ``g/config`` writes ``.git/config``. Protected, as
canonical paths beneath the workspace:

* every path with a component named ``.git``, in any case (``.GIT`` is the same
  directory on a case-insensitive file system): the workspace's repository and nested
  ones (``sub/.git``);
* the git dir that the workspace's ``.git`` points to when it is a file (``gitdir:``: a
  linked worktree, a submodule checkout, ``--separate-git-dir``) or a symlink, when that
  lies inside the workspace. (A git dir that only a nested ``.git`` file points to, or a
  bare repository, is not recognised: the sandbox does not protect those either.)

* the agents' state that the sandbox keeps read-only for commands too
  (``_sandbox.state_paths``): ``.codex`` and ``.agents`` at the top of the workspace
  (codex's project config and skills: also when missing, so a patch cannot create
  them), and trio-agent's and codex's homes where the workspace holds them (a workspace
  that is the home directory).

Deciding on the canonical path is only half of it: ``apply_patch`` then writes through
that canonical path without following any symlink (``Beneath.open_dir``), so a swap
after the decision fails the write instead of reaching ``.git``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from ._beneath import Beneath, Changed, Escape, Parts, TooManyLinks

__all__ = ["GitGuard", "git_writes"]

_GITDIR = "gitdir:"
_DOTGIT_LIMIT = 64 * 1024  # a .git file is one line; anything bigger is not one


class _Change(Protocol):
    """A file operation of a patch (``FileChange``) or of an approval (``ChangedFile``)."""

    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def move_to(self) -> str | None: ...


def _written(change: _Change) -> list[tuple[str, bool]]:
    """The places ``change`` writes, as (path, whether a final symlink is followed): a
    file written is its link's target, a file deleted (or moved away) the entry itself."""
    if change.kind == "delete":
        return [(change.path, False)]
    if change.kind == "update" and change.move_to is not None:
        return [(change.path, False), (change.move_to, True)]
    return [(change.path, True)]


class GitGuard:
    """The protected places of one workspace, found once (module docstring)."""

    def __init__(self, fs: Beneath, environ: Mapping[str, str] | None = None, *, git: bool = True) -> None:
        # ``git=False``: ``writable_git`` -- the sandbox lets commands write ``.git`` but
        # still keeps the agents' state read-only, so a patch guards only the latter.
        self._git = git
        self._gitdir = _pointed_gitdir(fs) if git else None
        self._state = _state_places(fs, os.environ if environ is None else environ)

    def protects(self, parts: Parts) -> bool:
        """Whether writing the canonical path ``parts`` writes a protected place."""
        return self.kept(parts) is not None

    def kept(self, parts: Parts) -> str | None:
        """The protected place that writing the canonical path ``parts`` writes, as the
        sandbox names it (``.git``, ``.codex``, ...), or None."""
        gitdir = self._gitdir
        if self._git and (any(part.casefold() == ".git" for part in parts) or (
                gitdir is not None and parts[: len(gitdir)] == gitdir)):
            return ".git"
        return next(("/".join(place) for place in self._state if parts[: len(place)] == place), None)


def _state_places(fs: Beneath, environ: Mapping[str, str]) -> list[Parts]:
    """The agents' state beneath the workspace (``_sandbox.state_paths``: ``.codex``,
    ``.agents``, the homes a workspace holds), as canonical paths. Missing ones too at
    the top (a patch may not create ``.codex/config.toml`` either); a home only when it
    exists strictly inside the workspace."""
    from ._sandbox import STATE_NAMES, agent_homes

    places: list[Parts] = [(name,) for name in STATE_NAMES]
    for home in agent_homes(environ):
        try:
            parts = fs.resolve(home)
        except (Escape, TooManyLinks, OSError, ValueError):
            continue  # outside the workspace (the usual case): apply_patch cannot write there anyway
        if parts and os.path.isdir(os.path.join(fs.real, *parts)):
            places.append(parts)
    return list(dict.fromkeys(places))


def git_writes(workspace: Path, changes: Iterable[_Change], *, git: bool = True) -> list[tuple[str, str, str]]:
    """Each protected place ``changes`` would write in ``workspace``, as (the path as given,
    its canonical path, the place it writes: ``GitGuard.kept``; ``git=False``: the agents'
    state only). A path that does not resolve beneath the workspace is left out:
    ``apply_patch`` refuses it on its own."""
    try:
        fs = Beneath(workspace)
    except OSError:
        return []
    with fs:
        guard = GitGuard(fs, git=git)
        found: list[tuple[str, str, str]] = []
        for change in changes:
            for path, follow in _written(change):
                try:
                    parts = fs.resolve(os.path.normpath(path), follow_final=follow)
                except (Escape, TooManyLinks, OSError, ValueError):
                    continue  # ValueError: a NUL in the path
                kept = guard.kept(parts)
                if kept is not None:
                    found.append((path, "/".join(parts), kept))
        return found


def _pointed_gitdir(fs: Beneath) -> Parts | None:
    """The canonical git dir the workspace's ``.git`` file or symlink points to, if it is
    inside the workspace."""
    try:
        dotgit = fs.resolve(".git")
    except (Escape, TooManyLinks, OSError):
        return None
    if dotgit != (".git",):
        return dotgit  # a symlink to a directory inside the workspace
    try:
        data, _status = fs.read_bytes(dotgit, limit=_DOTGIT_LIMIT)
    except (OSError, Changed):
        return None  # a directory (the usual case), nothing, or too big to be a .git file
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith(_GITDIR):
            try:
                return fs.resolve(line.removeprefix(_GITDIR).strip())
            except (Escape, TooManyLinks, OSError, ValueError):
                return None  # outside the workspace: apply_patch cannot write there anyway
    return None
