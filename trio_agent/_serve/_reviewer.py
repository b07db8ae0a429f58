"""Who reviews a thread's approval requests: ``approvalsReviewer`` (v2 ``ApprovalsReviewer``).

Theory of operation (issue 22). ``thread/start``, a cold ``thread/resume`` and
``thread/fork`` take ``approvalsReviewer``; the thread keeps it in its record
(``ThreadMeta.approvals_reviewer``, None meaning ``"user"``) and every response reports
what the thread has -- never another value than the one that decides.

- ``"user"`` (the default): each request goes to the thread's clients
  (``item/commandExecution/requestApproval``, ``item/fileChange/requestApproval``), as
  docs/app-server.md "Approvals and sandboxes" says.
- ``"auto_review"`` (and its legacy name ``"guardian_subagent"``): the request is
  reviewed by the server, not by a client. Codex reviews with a prompted reviewer
  model; this server has none, so its automatic review is the conservative one: it
  *denies* every request that needs approval (sandbox escapes, writes the policy asks
  about), tells the clients with ``item/autoApprovalReview/started`` and
  ``.../completed`` (``status: "denied"``, the rationale below), and the model gets a
  denial saying why, so it can continue inside the sandbox. Nothing is sent to a
  client to approve: a client whose approval handler accepts everything (the official
  Python SDK's default, which asks for ``auto_review``) cannot approve an escape by
  accident. What the policy does not ask about (``never``, or what the sandbox
  allows) runs as usual.
"""

from __future__ import annotations

from typing import Any

from .._base.approval_request import ApprovalRequest
from .._tools._security import ApprovalKind
from ._jsonrpc import InvalidParams
from ._params import Params, shown

__all__ = ["AUTO_REVIEW_RATIONALE", "REVIEWERS", "auto_review_notifications", "is_automatic", "parse_reviewer",
           "reviewer_json"]

Json = dict[str, Any]
REVIEWERS = ("user", "auto_review", "guardian_subagent")
AUTO_REVIEW_RATIONALE = (
    "denied by trio-agent's automatic review: this server has no reviewer model, so with approvalsReviewer "
    "auto_review it declines every request that needs approval instead of asking a client; continue within the "
    "sandbox, or start the thread with approvalsReviewer \"user\" to have its clients asked"
)


def parse_reviewer(params: Params) -> str | None:
    """``approvalsReviewer`` of a request (None: absent)."""
    value = params.get("approvalsReviewer")
    if value is None:
        return None
    if not isinstance(value, str) or value not in REVIEWERS:
        raise InvalidParams(f"{params.method}: `approvalsReviewer` must be one of {', '.join(REVIEWERS)} or null, "
                            f"got {shown(value)}")
    return value


def reviewer_json(reviewer: str | None) -> str:
    """What a response reports for a thread's stored reviewer."""
    return reviewer or "user"


def is_automatic(reviewer: str | None) -> bool:
    return reviewer in ("auto_review", "guardian_subagent")


def auto_review_notifications(thread_id: str, turn_id: str, request: ApprovalRequest,
                              now_ms: int, item: Json | None = None) -> list[tuple[str, Json]]:
    """The ``item/autoApprovalReview/*`` pair of one automatic (denying) review; a
    command's action shows what its item (``item``) shows, as an approval request does."""
    base: Json = {"threadId": thread_id, "turnId": turn_id, "reviewId": f"review-{request.approval_id}",
                  "targetItemId": request.call_id, "action": _action(request, item), "startedAtMs": now_ms}
    started = {**base, "review": {"status": "inProgress", "riskLevel": None, "userAuthorization": None,
                                  "rationale": None}}
    completed = {**base, "completedAtMs": now_ms, "decisionSource": "agent",
                 "review": {"status": "denied", "riskLevel": None, "userAuthorization": None,
                            "rationale": AUTO_REVIEW_RATIONALE}}
    return [("item/autoApprovalReview/started", started), ("item/autoApprovalReview/completed", completed)]


def _action(request: ApprovalRequest, item: Json | None) -> Json:
    cwd = str(request.cwd)
    if request.kind is ApprovalKind.FILE_CHANGE:
        return {"type": "applyPatch", "cwd": cwd, "files": [change.path for change in request.changes]}
    command = request.command or ""
    if item is not None and item.get("type") == "commandExecution":
        command = item["command"]
    return {"type": "command", "command": command, "cwd": cwd, "source": "unifiedExec"}
