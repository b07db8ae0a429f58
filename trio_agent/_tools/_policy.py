"""When a command or a patch needs approval: pure decisions, table-tested.

The rules follow codex's approval policies (``codex.md``; ``ApprovalPolicy`` states
them for users):

* commands: a request to run outside the sandbox (``sandbox_permissions:
  "require_escalated"``) is refused under ``never`` and asked otherwise; under
  ``untrusted`` every command that is not a known read-only one is asked first; under
  ``on-failure`` and ``untrusted`` a sandboxed command that failed the way a sandbox
  denial looks (:func:`denial_hint`) is asked again, to run outside the sandbox;
* patches (``apply_patch`` itself never writes outside the workspace): a patch the
  sandbox would not allow -- any patch in ``read-only``, one that writes ``.git`` in
  ``workspace-write`` without ``writable_git`` -- is refused under ``never`` and asked
  otherwise; ``untrusted`` asks before every patch.

Known read-only commands (:func:`is_known_safe`) are conservative: a sequence of
simple commands joined by ``&&``, ``||``, ``;`` or ``|``, each from a fixed list and
without an argument that writes or runs something else; no redirection, subshell,
command substitution or variable assignment.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import attrs

from .._base.approval_request import ChangedFile
from ._safe_commands import is_known_read_only
from ._security import ApprovalPolicy, Sandbox, SandboxMode

__all__ = ["CommandPlan", "PatchPlan", "denial_hint", "is_known_safe", "plan_command", "plan_patch"]

Action = Literal["run", "ask", "refuse"]
_ASKING = frozenset({ApprovalPolicy.ON_REQUEST, ApprovalPolicy.ON_FAILURE, ApprovalPolicy.UNTRUSTED})
_RETRYING = frozenset({ApprovalPolicy.ON_FAILURE, ApprovalPolicy.UNTRUSTED})


@attrs.frozen
class CommandPlan:
    """``action`` first; then, if it runs, whether ``outside_sandbox``; ``retry_on_denial``:
    ask to run it again outside the sandbox if it fails like a sandbox denial."""

    action: Action
    reason: str = ""
    outside_sandbox: bool = False
    retry_on_denial: bool = False


@attrs.frozen
class PatchPlan:
    """``git``: the places in ``.git`` (canonical paths: ``_git_guard``) that the patch
    writes and ``reason`` names; approving the patch approves writing exactly those."""

    action: Action
    reason: str = ""
    git: frozenset[str] = frozenset()


def plan_command(
    policy: ApprovalPolicy, sandbox: Sandbox, cmd: str, *, escalate: bool, justification: str | None
) -> CommandPlan:
    """What to do with ``cmd`` before it runs (see the module docstring)."""
    if escalate and sandbox.confined:
        if policy not in _ASKING:
            return CommandPlan(
                "refuse",
                "exec_command cannot run a command outside the sandbox: the approval policy is 'never', so "
                "there is nobody to approve it; run it inside the sandbox (omit sandbox_permissions) or do "
                "without it",
            )
        reason = justification or "the command asks to run outside the sandbox"
        return CommandPlan("ask", reason, outside_sandbox=True)
    retry = sandbox.confined and policy in _RETRYING
    if policy is ApprovalPolicy.UNTRUSTED and not is_known_safe(cmd):
        return CommandPlan(
            "ask", "approval policy 'untrusted': it is not a known read-only command", retry_on_denial=retry
        )
    return CommandPlan("run", retry_on_denial=retry)


def plan_patch(
    policy: ApprovalPolicy, sandbox: Sandbox, changes: Sequence[ChangedFile], *, workspace: Path | None = None
) -> PatchPlan:
    """What to do with a patch changing ``changes`` (see the module docstring). Its paths
    are decided on what they resolve to in ``workspace`` (without it: as spelled)."""
    git = _git_writes(sandbox, changes, workspace)
    blocked = _patch_blocked(sandbox, git)
    if blocked is None:
        if policy is ApprovalPolicy.UNTRUSTED:
            return PatchPlan("ask", "approval policy 'untrusted' asks before every change")
        return PatchPlan("run")
    if policy not in _ASKING:
        return PatchPlan(
            "refuse",
            f"apply_patch was refused: {blocked}, and the approval policy is 'never', so nobody can approve "
            "it; no file was changed",
        )
    return PatchPlan("ask", blocked, frozenset(canonical for _path, canonical, _kept in git))


def _patch_blocked(sandbox: Sandbox, git: Sequence[tuple[str, str, str]]) -> str | None:
    """Why the sandbox would not allow a patch writing the protected places ``git``, or None."""
    if sandbox.mode is SandboxMode.READ_ONLY:
        return "the sandbox is read-only" + (f", and it writes {_shown(*git[0])}" if git else "")
    return f"it writes {_shown(*git[0])}, and the sandbox keeps {git[0][2]} read-only" if git else None


def _shown(path: str, canonical: str, _kept: str = "") -> str:
    return path if canonical == os.path.normpath(path) else f"{path} (it resolves to {canonical})"


def _git_writes(
    sandbox: Sandbox, changes: Sequence[ChangedFile], workspace: Path | None
) -> list[tuple[str, str, str]]:
    """The writes of ``changes`` into ``.git`` (or the git dir a ``.git`` file points to:
    ``_git_guard``) where the sandbox keeps it read-only: (path as given, canonical path).
    Decided on what each path resolves to (issue 21: with ``g -> .git``, ``g/config``
    writes ``.git/config``); without a ``workspace``, on the spelling alone."""
    if sandbox.mode is SandboxMode.DANGER_FULL_ACCESS:
        return []
    # writable_git: .git may be written, the agents' state (.codex, .agents, the homes) not --
    # the sandbox keeps that read-only for commands in every confined mode (sec4's review).
    git = sandbox.mode is SandboxMode.READ_ONLY or not sandbox.writable_git
    if workspace is not None:
        from ._git_guard import git_writes  # loaded by the first patch

        return git_writes(workspace, changes, git=git)
    from ._sandbox import STATE_NAMES

    paths = (path for change in changes for path in (change.path, change.move_to) if path is not None)
    found: list[tuple[str, str, str]] = []
    for path in paths:
        parts = os.path.normpath(path).split(os.sep)
        if git and ".git" in [part.casefold() for part in parts]:
            found.append((path, os.path.normpath(path), ".git"))
        elif parts[0] in STATE_NAMES:
            found.append((path, os.path.normpath(path), parts[0]))
    return found


# -- sandbox denials ---------------------------------------------------------------------------

_DENIAL_MARKERS = (
    "read-only file system",
    "permission denied",
    "operation not permitted",
    "network is unreachable",
    "could not resolve host",
    "temporary failure in name resolution",
    "name or service not known",
)
_HINT_LIMIT = 200


def denial_hint(exit_code: int | None, output: str) -> str | None:
    """The first output line that makes a failed command look like a sandbox denial."""
    if not exit_code:
        return None
    for line in output.splitlines():
        lowered = line.lower()
        if any(marker in lowered for marker in _DENIAL_MARKERS):
            line = line.strip()
            return line if len(line) <= _HINT_LIMIT else line[: _HINT_LIMIT - 3] + "..."
    return None


# -- known read-only commands ------------------------------------------------------------------


def is_known_safe(cmd: str) -> bool:
    """Whether ``cmd`` is a line of known read-only commands: each command's options
    and operands checked against its allowlist (:mod:`._safe_commands`)."""
    return is_known_read_only(cmd)
