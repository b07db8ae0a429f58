"""The agents' state a sandboxed command creates where it was missing (sec7), and why the
sandbox cannot stop that with ``bwrap`` 0.8.

The sandbox keeps ``.codex`` and ``.agents`` at the top of each writable root read-only
(``_sandbox.state_paths``): codex reads a project's ``.codex/config.toml`` (MCP servers,
a model provider: programs it runs outside any sandbox) and its skills from
``.agents``. That holds for the ones that exist. A missing one a command may create, and
a ``config.toml`` planted there is a way out through the next codex started in that
workspace. (trio-agent reads neither: its settings come from ``AgentConfig`` and
``-c`` overrides only, and ``apply_patch`` refuses to write under either name, missing
or not: ``_git_guard``.)

Why not stop it. Codex's Linux sandbox (``codex-rs/linux-sandbox``: its README, "non-
existent protected paths inside writable roots are blocked by mounting ``/dev/null``
on the symlink or first missing component", and ``bwrap_mount_cleanup.rs``) mounts
``/dev/null`` at the missing name. A mount needs a mount point, and inside a writable
root that is the host's own directory (the root is bound over itself): ``bwrap``
creates an empty file named ``.codex`` in the user's workspace, which codex removes
after the command, counting the sandboxes that still use it through marker files in
the temp directory. The mount cannot outlive that file either -- the host's unlink of
a mount point detaches the mount in every namespace -- so the file stays while any
command runs (in ``git status``, in the user's editor) and after a crash. ``bwrap``
0.8 has no overlay (``--overlay``, ``--tmp-overlay``: 0.9) that would keep the mount
point out of the host's directory; Landlock grants creation per directory, not per
name; seccomp cannot read a path. So nothing without litter exists here.

The mitigation: each sandboxed ``workspace-write`` command notes what is at each of
those places when it starts (``lstat``: the inode and type, a link's text; missing);
once its whole sandbox is gone, one that is there and not what it found -- created,
or replaced -- is moved aside (``.codex`` becomes ``.codex.created-by-a-command``,
suffixed if taken: nothing is deleted) so that no codex reads it, and the command's
output says so. It may have been another command of the same agent, or the user, in
that window: the output says what was moved and where. What a command could do to
keep its plant, and why it cannot (sec8's review):

* every place is watched, not only the missing ones: an existing directory is bound
  read-only (a mount point: it cannot be removed or renamed), but one made by another
  command still running is moved aside when that one ends, and a command started
  meanwhile could then make it again; nor is a file (codex's own sandbox leaves an
  empty ``.codex`` there after a crash) or a link bound, and either could be replaced
  by a directory;
* the names beside it are the first ten choices only, then unguessable ones: a
  command could make all of a fixed list of names in advance;
* a root the command made unsearchable or read-only to its owner (the agent's user,
  not root) is given back its owner's access while the plant is moved, then the mode
  the command left.

With the workspace at ``$HOME``, codex's home (``~/.codex``: its settings, its login)
is the project's ``.codex`` too; trio-agent never creates it (it only rewrites an
existing ``auth.json``), so one a command creates is moved aside as well. The agent's
own home (``~/.trio-agent``), and a home deeper in a root (the workspace is ``/home``:
a command could swap a directory above it for a link, and the move would rename
something elsewhere), are only reported: the agent's process may create its own
meanwhile (its sessions).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from ._security import Sandbox, SandboxMode

__all__ = ["MOVED_SUFFIX", "StateWatch", "watch_state"]

#: What a place created by a command is renamed to (plus ``-N`` when that is taken).
MOVED_SUFFIX = ".created-by-a-command"
_NAMED = 10  # then unguessable suffixes (sec8: a command made every name of a fixed list)
#: What ``lstat`` says of a place: its device, inode and type, a link's text; None: missing.
Identity = tuple[int, int, int, str | None] | None


class StateWatch:
    """What was at the agents' state places when one command started (module docstring)."""

    __slots__ = ("homes", "places")

    def __init__(self, places: dict[str, Identity], homes: list[str]) -> None:
        self.places, self.homes = places, homes

    def settle(self) -> str | None:
        """Once the command's sandbox is gone: move aside each place that is there and not
        what it was when the command started, and say so (None: nothing changed)."""
        notes: list[str] = []
        for place, before in self.places.items():
            with _searchable(os.path.dirname(place)):
                now = _identity(place)
                if now is None or now == before:
                    continue
                moved = _move_aside(place)
            notes.append(f"{place} was created while the command ran; "
                         + (f"moved to {moved}" if moved else "it could not be moved aside") +
                         " (codex would read it as this project's settings)")
        notes += [f"{home} was created while the command ran (an agent's home: left in place)"
                  for home in self.homes if os.path.lexists(home)]
        return "\n".join(f"[sandbox] {note}" for note in notes) if notes else None


def watch_state(sandbox: Sandbox, workspace: Path, names: Iterable[str], homes: Iterable[str],
                own: Iterable[str] = ()) -> StateWatch | None:
    """The watch for one command about to start in ``sandbox``: ``names`` at the top of
    each writable root and the ``homes`` at the top of one (``_sandbox.STATE_NAMES``,
    codex's home), moved aside when changed; the agent's ``own`` homes, and the
    ``homes`` deeper in a root, reported when created. None: nothing to watch (not
    ``workspace-write``)."""
    if sandbox.mode is not SandboxMode.WORKSPACE_WRITE:
        return None
    roots = list(dict.fromkeys(os.path.realpath(root) for root in (workspace, *sandbox.writable_roots)))

    def held(path: str) -> bool:
        return any(path != root and path.startswith(root.rstrip("/") + "/") for root in roots)

    # A home directly in a root (the workspace is $HOME) is watched as a place; one
    # deeper down only reported: a command could swap a directory above it for a link,
    # and the move would then rename something outside the roots.
    homes = [home for home in map(_real_parent, homes) if held(home)]
    own = [*(home for home in map(_real_parent, own) if held(home)),
           *(home for home in homes if os.path.dirname(home) not in roots)]
    places = [os.path.join(root, name) for root in roots for name in names]
    places += [home for home in homes if os.path.dirname(home) in roots]
    watched = {place: _identity(place) for place in dict.fromkeys(places) if place not in own}
    watch = StateWatch(watched, [home for home in own if not os.path.lexists(home)])
    return watch if watch.places or watch.homes else None


def _real_parent(path: str) -> str:
    """``path`` with its directory's real path (not its own: a link there is the place)."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _identity(place: str) -> Identity:
    """What is at ``place`` (None: nothing). A link's text counts: a link replaced by
    one to elsewhere may reuse the inode."""
    try:
        info = os.lstat(place)
    except FileNotFoundError:
        return None
    except OSError:  # not searchable even now: nothing that could be compared
        return (-1, -1, -1, None)
    link = None
    if stat.S_ISLNK(info.st_mode):
        try:
            link = os.readlink(place)
        except OSError:
            link = ""
    return (info.st_dev, info.st_ino, stat.S_IFMT(info.st_mode), link)


@contextlib.contextmanager
def _searchable(root: str) -> Iterator[None]:
    """``root`` searchable and writable by its owner while the block runs, then the mode
    it had: a command may have taken that from the agent's user (root needs nothing)."""
    try:
        info = os.lstat(root)
    except OSError:
        yield
        return
    mode = stat.S_IMODE(info.st_mode)
    if os.geteuid() == 0 or info.st_uid != os.geteuid() or mode & 0o300 == 0o300:
        yield
        return
    try:
        os.chmod(root, mode | 0o300)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.chmod(root, mode)


def _move_aside(place: str) -> str | None:
    """Rename ``place`` to a free name beside it (None: it could not be renamed)."""
    for attempt in range(_NAMED + 20):
        suffix = "" if not attempt else f"-{attempt}" if attempt < _NAMED else f"-{secrets.token_hex(8)}"
        target = place + MOVED_SUFFIX + suffix
        if os.path.lexists(target):
            continue
        try:
            os.rename(place, target)  # a name made meanwhile: the next attempt
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                continue
            return None
        return target
    return None
