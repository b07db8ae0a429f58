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
user, in that window: the output says what was moved and where. The homes a writable
root holds (``~/.codex``, ``~/.trio-agent`` with the workspace at ``$HOME``) are only
reported: the agent's own process may create them meanwhile (its sessions).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ._security import Sandbox, SandboxMode

__all__ = ["MOVED_SUFFIX", "StateWatch", "watch_state"]

#: What a place created by a command is renamed to (plus ``-N`` when that is taken).
MOVED_SUFFIX = ".created-by-a-command"


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
            if os.path.lexists(place):
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


def _move_aside(place: str) -> str | None:
    """Rename ``place`` to a free name beside it (None: it could not be renamed)."""
    for attempt in range(100):
        target = place + MOVED_SUFFIX + (f"-{attempt}" if attempt else "")
        if os.path.lexists(target):
            continue
        try:
            os.rename(place, target)  # a race with a name made meanwhile: the next attempt
        except FileExistsError:
            continue
        except OSError:
            return None
        return target
    return None
