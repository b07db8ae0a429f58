"""``ApprovalRequest`` and ``ChangedFile``: what an approval hook is asked.

A module of their own (not ``_security``) so that their attrs classes are built by the
first approval request or patch, not by ``import trio_agent``: an agent whose policy
never asks does not pay for them.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from .policies import ApprovalKind

__all__ = ["ApprovalRequest", "ChangedFile"]


@attrs.frozen
class ChangedFile:
    """One file a patch changes: ``kind`` is ``"add"``, ``"update"`` or ``"delete"``;
    ``move_to`` is the new path of a renamed file. Paths are relative to the workspace."""

    path: str
    kind: str
    move_to: str | None = None


@attrs.frozen
class ApprovalRequest:
    """What the hook is asked to approve.

    ``call_id`` names the tool call (``<exec call id>/code-<n>``); ``turn_id`` its turn
    (None when the cell that made it runs on after its turn ended). ``command`` and
    ``cwd`` are the shell command and its working directory (for a patch: None and the
    workspace). ``reason`` says why approval is needed (it asks to leave the sandbox,
    it failed in a way that looks like a sandbox denial, it writes ``.git``, ...).
    ``outside_sandbox`` is True when approving runs the command without the sandbox.
    ``changes`` lists the files of a patch. ``session_id`` is the session of the agent
    that asks (children and forks share their parent's hook).
    """

    kind: ApprovalKind
    approval_id: str
    call_id: str
    turn_id: int | None
    cwd: Path
    reason: str
    command: str | None = None
    outside_sandbox: bool = False
    changes: tuple[ChangedFile, ...] = ()
    session_id: str | None = None

    def to_json(self) -> dict[str, object]:
        """The ``approval.requested`` event payload."""
        payload: dict[str, object] = {
            "approval_id": self.approval_id,
            "kind": self.kind.value,
            "call_id": self.call_id,
            "cwd": str(self.cwd),
            "reason": self.reason,
        }
        if self.command is not None:
            payload["command"] = self.command
            payload["outside_sandbox"] = self.outside_sandbox
        if self.kind is ApprovalKind.FILE_CHANGE:
            payload["changes"] = [
                {"path": c.path, "kind": c.kind, **({"move_to": c.move_to} if c.move_to else {})}
                for c in self.changes
            ]
        return payload
