"""Approvals over the protocol: a served thread's ``ta.Approvals`` hook asks its clients.

Theory of operation (issue 14 item 5). A thread's agent runs with ``ta.Approvals(policy,
hook=...)`` whose hook (``_asking.ClientQuestions.approve``) turns each ``ta.ApprovalRequest`` into
a server request to the thread's subscribers -- ``item/commandExecution/requestApproval``
for a command, ``item/fileChange/requestApproval`` for a patch -- and the first answer
into a ``ta.ApprovalDecision`` (``decision_of``). The request waits until the pump has
passed the ``approval.requested`` event (``_dynamic.Introductions``, keyed by approval
id): by then the item it names
(the command's ``commandExecution``, the patch's ``fileChange``) has been started on the
wire, and the thread's status says ``waitingOnApproval``.

Everything but an answer is the hook raising, which the runtime counts as a denial: a
JSON-RPC error reply, a reply that is not a decision, every asked client gone, no
subscriber at all, a request from a cell that outlived its turn. When the hook is
cancelled -- the approval timed out, its turn ended or was cancelled -- every client
that was asked gets ``serverRequest/resolved`` and the cancellation goes on.
"""

from __future__ import annotations

from typing import Any

from .._base.approval_request import ApprovalRequest
from .._tools._security import ApprovalDecision, ApprovalKind
from ._params import shown

__all__ = ["APPROVAL_METHODS", "ApprovalUnanswered", "decision_of", "request_params"]

Json = dict[str, Any]
APPROVAL_METHODS = {
    ApprovalKind.COMMAND: "item/commandExecution/requestApproval",
    ApprovalKind.FILE_CHANGE: "item/fileChange/requestApproval",
}
_PLAIN = {
    "accept": ApprovalDecision.APPROVE,
    "acceptForSession": ApprovalDecision.APPROVE_FOR_SESSION,
    "decline": ApprovalDecision.DENY,
    "cancel": ApprovalDecision.ABORT,
}
# Amendments are codex's policy engines (exec policy, network rules), which this server
# does not have; they decide this call: an exec-policy amendment approves the command for
# the session, a network rule approves this call ("allow") or denies it ("deny").
_NETWORK_ACTIONS = {"allow": ApprovalDecision.APPROVE, "deny": ApprovalDecision.DENY}


class ApprovalUnanswered(Exception):
    """Nobody can answer this approval (the runtime denies the call, saying why)."""


def request_params(thread_id: str, turn_id: str, request: ApprovalRequest, now_ms: int,
                   item: Json | None = None) -> Json:
    """The params of the server request asking for ``request`` (see ``APPROVAL_METHODS``).
    A command shows what its item (``item``, the one the request names) shows: the
    shell's command line, as codex sends it, and the bare command as its action."""
    base: Json = {"threadId": thread_id, "turnId": turn_id, "itemId": request.call_id, "reason": request.reason,
                  "startedAtMs": now_ms}
    if request.kind is ApprovalKind.FILE_CHANGE:
        return {**base, "grantRoot": None}
    command = request.command or ""
    actions = [{"type": "unknown", "command": command}]
    if item is not None and item.get("type") == "commandExecution":
        command, actions = item["command"], [dict(action) for action in item["commandActions"]]
    return {**base, "approvalId": request.approval_id, "command": command, "cwd": str(request.cwd),
            "commandActions": actions, "proposedExecpolicyAmendment": None,
            "proposedNetworkPolicyAmendments": None, "networkApprovalContext": None}


def decision_of(kind: ApprovalKind, result: object) -> ApprovalDecision:
    """The decision in a client's ``*RequestApprovalResponse``; ``ValueError`` saying what
    is wrong with anything else (the runtime then denies)."""
    decision = result.get("decision") if isinstance(result, dict) else None
    if isinstance(decision, str) and decision in _PLAIN:
        return _PLAIN[decision]
    if kind is ApprovalKind.COMMAND and isinstance(decision, dict) and len(decision) == 1:
        [(name, value)] = decision.items()
        if name == "acceptWithExecpolicyAmendment":
            return ApprovalDecision.APPROVE_FOR_SESSION
        if name == "applyNetworkPolicyAmendment":
            amendment = value.get("network_policy_amendment") if isinstance(value, dict) else None
            action = amendment.get("action") if isinstance(amendment, dict) else None
            if isinstance(action, str) and action in _NETWORK_ACTIONS:
                return _NETWORK_ACTIONS[action]
    allowed = "accept, acceptForSession, decline, cancel" + (
        ", {acceptWithExecpolicyAmendment}, {applyNetworkPolicyAmendment: {network_policy_amendment: "
        "{host, action: allow | deny}}}" if kind is ApprovalKind.COMMAND else "")
    raise ValueError(f"the client's answer to {APPROVAL_METHODS[kind]} is not a decision ({allowed}): "
                     f"{shown(result)}")
