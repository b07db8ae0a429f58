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

The mitigation: each sandboxed ``workspace-write`` command notes which of those
places are missing when it starts (a few ``lstat``); once its whole sandbox is gone,
one that appeared since is moved aside (``.codex`` becomes ``.codex.created-by-a-
command``, suffixed if taken: nothing is deleted) so that no codex reads it, and the
command's output says so. It may have been another command of the same agent, or the
user, in that window: the output says what was moved and where. A command cannot
keep its plant by making every name it would be moved to in advance (after the first
ten, the names are unguessable), nor, the agent not being root, by taking its
owner's access to the root away (given back while the plant is moved, then the mode
the command left put back) (sec8). The homes a writable
root holds (``~/.codex``, ``~/.trio-agent`` with the workspace at ``$HOME``) are only
reported: the agent's own process may create them meanwhile (its sessions).
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


class StateWatch:
    """The agents' state places missing when one command started (module docstring)."""

    __slots__ = ("homes", "places")

    def __init__(self, places: list[str], homes: list[str]) -> None:
        self.places, self.homes = places, homes

    def settle(self) -> str | None:
        """Once the command's sandbox is gone: move aside each place that appeared since
        it started, and say so (None: nothing appeared)."""
        notes: list[str] = []
        for place in self.places:
            with _searchable(os.path.dirname(place)):
                if not os.path.lexists(place):
                    continue
                moved = _move_aside(place)
            notes.append(f"{place} was created while the command ran; "
                             + (f"moved to {moved}" if moved else "it could not be moved aside") +
                             " (codex would read it as this project's settings)")
        notes += [f"{home} was created while the command ran (an agent's home: left in place)"
                  for home in self.homes if os.path.lexists(home)]
        return "\n".join(f"[sandbox] {note}" for note in notes) if notes else None


def watch_state(sandbox: Sandbox, workspace: Path, names: Iterable[str], homes: Iterable[str]) -> StateWatch | None:
    """The watch for one command about to start in ``sandbox``: ``names`` at the top of
    each writable root, the agents' ``homes`` a root holds (``_sandbox.STATE_NAMES``,
    ``agent_homes``). None: nothing to watch (not ``workspace-write``, or all exist)."""
    if sandbox.mode is not SandboxMode.WORKSPACE_WRITE:
        return None
    roots = [os.path.realpath(root) for root in (workspace, *sandbox.writable_roots)]
    homes = [home for home in homes
             if any(home != root and home.startswith(root.rstrip("/") + "/") for root in roots)]
    places = [place for root in dict.fromkeys(roots) for name in names
              if (place := os.path.join(root, name)) not in homes]  # ~/.codex with the workspace at $HOME
    watch = StateWatch([p for p in places if not os.path.lexists(p)], [h for h in homes if not os.path.lexists(h)])
    return watch if watch.places or watch.homes else None


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
