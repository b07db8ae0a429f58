"""Payloads of the sandbox and the approval policy (``approval.*``, ``sandbox.unavailable``).
Emitted by ``_runtime/_calls/_permissions.py``."""

from typing import Literal, NotRequired, TypedDict

__all__ = ["ApprovalChange", "ApprovalRequestedPayload", "ApprovalResolvedPayload", "SandboxUnavailablePayload"]


class ApprovalChange(TypedDict):
    """One file a patch waiting for approval would change."""

    path: str
    """The file, relative to the workspace."""
    kind: Literal["add", "update", "delete"]
    """What the patch does to it."""
    move_to: NotRequired[str]
    """The new path of a renamed file."""


class ApprovalRequestedPayload(TypedDict):
    """A command or a patch waits for the approval hook (``AgentConfig(approval=...)``);
    its ``approval.resolved`` follows."""

    approval_id: str
    """This request's id (the hook's ``ApprovalRequest.approval_id``)."""
    kind: Literal["command", "file_change"]
    """A command to run (``exec_command``) or a patch to apply (``apply_patch``)."""
    call_id: str
    """The tool call that asked."""
    cwd: str
    """Where the command would run (the workspace for a patch)."""
    reason: str
    """Why the policy asks (or the model's justification)."""
    command: NotRequired[str]
    """Commands only: the command line."""
    outside_sandbox: NotRequired[bool]
    """Commands only: whether it would run outside the sandbox."""
    changes: NotRequired[list[ApprovalChange]]
    """Patches only: the files it changes."""


class ApprovalResolvedPayload(TypedDict):
    """An approval request was decided."""

    approval_id: str
    """The id of its ``approval.requested``."""
    call_id: str
    """The tool call that asked."""
    decision: Literal["approve", "approve_for_session", "deny", "abort"]
    """The decision that applies (anything but the hook's own answer is a denial)."""
    source: Literal["hook", "timeout", "error", "withdrawn", "cancelled"]
    """Who decided: the hook, or the runtime when the hook timed out, failed, the turn
    ended first (withdrawn) or the call was cancelled."""
    error: NotRequired[str]
    """When the hook failed: what went wrong."""


class SandboxUnavailablePayload(TypedDict):
    """The agent started without a sandbox because none was asked for and Bubblewrap is
    unusable here: commands run with full access. The agent's first event."""

    mode: Literal["danger-full-access"]
    """The mode commands run in."""
    reason: str
    """Why, and how to get a sandbox."""
