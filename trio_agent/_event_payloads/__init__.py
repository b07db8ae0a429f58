"""Typed event payloads: one ``TypedDict`` per ``EventKind``, and how to narrow to it.

``AgentEvent.payload`` is a plain dict at runtime (what ``write_jsonl`` writes as
``payload``); these declarations say what it holds for each kind, so that a type
checker can follow a user's reads. ``payload_of(event, kind)`` is the narrowing step
(see ``_access``); ``EVENT_PAYLOADS`` maps each kind to its declaration at runtime.

The declarations are the single source for ``docs/events.md`` (each class docstring
says when the kind is emitted, each field's docstring what it means;
``python -m trio_agent._event_payloads`` regenerates the file) and for the shape check
that the test suite runs on every event it sees (``_check``). Values the runtime passes
through from elsewhere -- a raw API frame, a tool's arguments or result, the server's
``usage`` object -- are typed as ``JsonValue``, never ``Any``.
"""

from collections.abc import Iterator, Mapping

from .._events import EventKind
from ._access import EventPayload, payload_of
from ._approval import ApprovalChange, ApprovalRequestedPayload, ApprovalResolvedPayload, SandboxUnavailablePayload
from ._model import (
    ApiEventPayload,
    ApiWarningPayload,
    ModelAttemptFailedPayload,
    ModelAttemptRetryingPayload,
    ModelAttemptStartedPayload,
    ModelCallCompletedPayload,
    ModelCallFailedPayload,
    ModelCallStartedPayload,
    ModelCompactionCompletedPayload,
    ModelCompactionFailedPayload,
    ModelCompactionStartedPayload,
    ModelConnectionCompletedPayload,
    ModelConnectionFailedPayload,
    ModelConnectionStartedPayload,
    ModelWarmupCompletedPayload,
    ModelWarmupFailedPayload,
    ModelWarmupStartedPayload,
)
from ._run import (
    AssistantDeltaPayload,
    AssistantMessagePayload,
    ReasoningSummaryDeltaPayload,
    RunCompletedPayload,
    RunErrorPayload,
    RunFailedPayload,
    RunStartedPayload,
    RunSteeredPayload,
)
from ._shared import JsonValue, TokenCounts
from ._tool import (
    McpServerFailedPayload,
    McpServerReadyPayload,
    PlanStep,
    PlanUpdatedPayload,
    SleepCompletedPayload,
    SleepStartedPayload,
    ToolCallPayload,
    ToolProgressPayload,
    ToolResultPayload,
)

__all__ = [
    "EVENT_PAYLOADS",
    "ApiEventPayload",
    "ApiWarningPayload",
    "ApprovalChange",
    "ApprovalRequestedPayload",
    "ApprovalResolvedPayload",
    "AssistantDeltaPayload",
    "AssistantMessagePayload",
    "EventPayload",
    "JsonValue",
    "McpServerFailedPayload",
    "McpServerReadyPayload",
    "ModelAttemptFailedPayload",
    "ModelAttemptRetryingPayload",
    "ModelAttemptStartedPayload",
    "ModelCallCompletedPayload",
    "ModelCallFailedPayload",
    "ModelCallStartedPayload",
    "ModelCompactionCompletedPayload",
    "ModelCompactionFailedPayload",
    "ModelCompactionStartedPayload",
    "ModelConnectionCompletedPayload",
    "ModelConnectionFailedPayload",
    "ModelConnectionStartedPayload",
    "ModelWarmupCompletedPayload",
    "ModelWarmupFailedPayload",
    "ModelWarmupStartedPayload",
    "PlanStep",
    "PlanUpdatedPayload",
    "ReasoningSummaryDeltaPayload",
    "RunCompletedPayload",
    "RunErrorPayload",
    "RunFailedPayload",
    "RunStartedPayload",
    "RunSteeredPayload",
    "SandboxUnavailablePayload",
    "SleepCompletedPayload",
    "SleepStartedPayload",
    "TokenCounts",
    "ToolCallPayload",
    "ToolProgressPayload",
    "ToolResultPayload",
    "payload_of",
]

_DECLARED: dict[EventKind, type] = {
    EventKind.RUN_STARTED: RunStartedPayload,
    EventKind.RUN_STEERED: RunSteeredPayload,
    EventKind.RUN_ERROR: RunErrorPayload,
    EventKind.RUN_COMPLETED: RunCompletedPayload,
    EventKind.RUN_FAILED: RunFailedPayload,
    EventKind.ASSISTANT_DELTA: AssistantDeltaPayload,
    EventKind.ASSISTANT_MESSAGE: AssistantMessagePayload,
    EventKind.REASONING_SUMMARY_DELTA: ReasoningSummaryDeltaPayload,
    EventKind.TOOL_CALL: ToolCallPayload,
    EventKind.TOOL_RESULT: ToolResultPayload,
    EventKind.TOOL_PROGRESS: ToolProgressPayload,
    EventKind.MODEL_WARMUP_STARTED: ModelWarmupStartedPayload,
    EventKind.MODEL_WARMUP_COMPLETED: ModelWarmupCompletedPayload,
    EventKind.MODEL_WARMUP_FAILED: ModelWarmupFailedPayload,
    EventKind.MODEL_CALL_STARTED: ModelCallStartedPayload,
    EventKind.MODEL_CALL_COMPLETED: ModelCallCompletedPayload,
    EventKind.MODEL_CALL_FAILED: ModelCallFailedPayload,
    EventKind.MODEL_COMPACTION_STARTED: ModelCompactionStartedPayload,
    EventKind.MODEL_COMPACTION_COMPLETED: ModelCompactionCompletedPayload,
    EventKind.MODEL_COMPACTION_FAILED: ModelCompactionFailedPayload,
    EventKind.MODEL_ATTEMPT_STARTED: ModelAttemptStartedPayload,
    EventKind.MODEL_ATTEMPT_FAILED: ModelAttemptFailedPayload,
    EventKind.MODEL_ATTEMPT_RETRYING: ModelAttemptRetryingPayload,
    EventKind.MODEL_CONNECTION_STARTED: ModelConnectionStartedPayload,
    EventKind.MODEL_CONNECTION_COMPLETED: ModelConnectionCompletedPayload,
    EventKind.MODEL_CONNECTION_FAILED: ModelConnectionFailedPayload,
    EventKind.SLEEP_STARTED: SleepStartedPayload,
    EventKind.SLEEP_COMPLETED: SleepCompletedPayload,
    EventKind.PLAN_UPDATED: PlanUpdatedPayload,
    EventKind.MCP_SERVER_READY: McpServerReadyPayload,
    EventKind.MCP_SERVER_FAILED: McpServerFailedPayload,
    EventKind.APPROVAL_REQUESTED: ApprovalRequestedPayload,
    EventKind.APPROVAL_RESOLVED: ApprovalResolvedPayload,
    EventKind.SANDBOX_UNAVAILABLE: SandboxUnavailablePayload,
    EventKind.API_EVENT: ApiEventPayload,
    EventKind.API_WARNING: ApiWarningPayload,
}


class _PayloadTable(Mapping[EventKind, type]):
    """``EVENT_PAYLOADS``: a read-only mapping (an object of its own, so that the public
    name can report its module like every other exported name)."""

    def __init__(self, table: Mapping[EventKind, type]) -> None:
        self._table = dict(table)

    def __getitem__(self, kind: EventKind, /) -> type:
        return self._table[kind]

    def __iter__(self) -> Iterator[EventKind]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        return f"EVENT_PAYLOADS({len(self)} kinds)"


EVENT_PAYLOADS: Mapping[EventKind, type] = _PayloadTable(_DECLARED)
"""Each ``EventKind``'s payload declaration (a ``TypedDict`` class), in ``EventKind`` order."""
