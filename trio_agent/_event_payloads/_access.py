"""``payload_of(event, kind)``: an event's payload typed as ``kind``'s declaration.

Why a function with one overload per kind, rather than a method or a union of event
classes: ``AgentEvent`` stays one frozen class (what ``write_jsonl``, the rollout and
every consumer already share), and ``Literal[EventKind.X]`` overloads are what both
mypy and pyright resolve exactly in strict mode -- the call site names the kind once
and gets that kind's ``TypedDict``, with no cast and no ``Any``. A kind only known at
runtime (a plain ``EventKind`` value) gets the union of every payload.
``tests/test_event_payloads.py`` checks these overloads against ``EVENT_PAYLOADS``.
"""

from __future__ import annotations  # the overloads are for the type checkers: not evaluated at import

from typing import Literal, TypeAlias, Union, cast, overload

from .._events import AgentEvent, EventKind
from ._approval import ApprovalRequestedPayload, ApprovalResolvedPayload, SandboxUnavailablePayload
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
    ModelCompactionFallbackPayload,
    ModelCompactionStartedPayload,
    ModelConnectionCompletedPayload,
    ModelConnectionFailedPayload,
    ModelConnectionStartedPayload,
    ModelWarmupCompletedPayload,
    ModelWarmupFailedPayload,
    ModelWarmupStartedPayload,
)
from ._run import (
    AgentAsleepPayload,
    AgentWokePayload,
    AssistantDeltaPayload,
    AssistantMessagePayload,
    ReasoningSummaryDeltaPayload,
    RunCompletedPayload,
    RunErrorPayload,
    RunFailedPayload,
    RunStartedPayload,
    RunSteeredPayload,
)
from ._tool import (
    McpLogPayload,
    McpProgressPayload,
    McpServerFailedPayload,
    McpServerReadyPayload,
    McpServerRestartingPayload,
    PlanUpdatedPayload,
    SleepCompletedPayload,
    SleepStartedPayload,
    ToolBlockedPayload,
    ToolCallPayload,
    ToolProgressPayload,
    ToolResultPayload,
)

__all__ = ["EventPayload", "payload_of"]

# A union object from ``typing``, like ``JsonValue``: the public alias reports its module.
EventPayload: TypeAlias = Union[  # noqa: UP007
    RunStartedPayload,
    RunSteeredPayload,
    RunErrorPayload,
    RunCompletedPayload,
    RunFailedPayload,
    AssistantDeltaPayload,
    AssistantMessagePayload,
    ReasoningSummaryDeltaPayload,
    ToolCallPayload,
    ToolResultPayload,
    ToolProgressPayload,
    ToolBlockedPayload,
    ModelWarmupStartedPayload,
    ModelWarmupCompletedPayload,
    ModelWarmupFailedPayload,
    ModelCallStartedPayload,
    ModelCallCompletedPayload,
    ModelCallFailedPayload,
    ModelCompactionStartedPayload,
    ModelCompactionCompletedPayload,
    ModelCompactionFailedPayload,
    ModelCompactionFallbackPayload,
    ModelAttemptStartedPayload,
    ModelAttemptFailedPayload,
    ModelAttemptRetryingPayload,
    ModelConnectionStartedPayload,
    ModelConnectionCompletedPayload,
    ModelConnectionFailedPayload,
    SleepStartedPayload,
    SleepCompletedPayload,
    AgentAsleepPayload,
    AgentWokePayload,
    PlanUpdatedPayload,
    McpServerReadyPayload,
    McpServerFailedPayload,
    McpServerRestartingPayload,
    McpProgressPayload,
    McpLogPayload,
    ApprovalRequestedPayload,
    ApprovalResolvedPayload,
    SandboxUnavailablePayload,
    ApiEventPayload,
    ApiWarningPayload,
]
"""Any kind's payload."""
EventPayload.__module__ = __name__  # type: ignore[misc]  # typing's aliases allow dunders


@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.RUN_STARTED]) -> RunStartedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.RUN_STEERED]) -> RunSteeredPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.RUN_ERROR]) -> RunErrorPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.RUN_COMPLETED]) -> RunCompletedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.RUN_FAILED]) -> RunFailedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.ASSISTANT_DELTA]) -> AssistantDeltaPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.ASSISTANT_MESSAGE]) -> AssistantMessagePayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.REASONING_SUMMARY_DELTA]
) -> ReasoningSummaryDeltaPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.TOOL_CALL]) -> ToolCallPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.TOOL_RESULT]) -> ToolResultPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.TOOL_PROGRESS]) -> ToolProgressPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.TOOL_BLOCKED]) -> ToolBlockedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_WARMUP_STARTED]
) -> ModelWarmupStartedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_WARMUP_COMPLETED]
) -> ModelWarmupCompletedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.MODEL_WARMUP_FAILED]) -> ModelWarmupFailedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.MODEL_CALL_STARTED]) -> ModelCallStartedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_CALL_COMPLETED]
) -> ModelCallCompletedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.MODEL_CALL_FAILED]) -> ModelCallFailedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_COMPACTION_STARTED]
) -> ModelCompactionStartedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_COMPACTION_COMPLETED]
) -> ModelCompactionCompletedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_COMPACTION_FAILED]
) -> ModelCompactionFailedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_COMPACTION_FALLBACK]
) -> ModelCompactionFallbackPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_ATTEMPT_STARTED]
) -> ModelAttemptStartedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_ATTEMPT_FAILED]
) -> ModelAttemptFailedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_ATTEMPT_RETRYING]
) -> ModelAttemptRetryingPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_CONNECTION_STARTED]
) -> ModelConnectionStartedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_CONNECTION_COMPLETED]
) -> ModelConnectionCompletedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MODEL_CONNECTION_FAILED]
) -> ModelConnectionFailedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.SLEEP_STARTED]) -> SleepStartedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.SLEEP_COMPLETED]) -> SleepCompletedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.AGENT_ASLEEP]) -> AgentAsleepPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.AGENT_WOKE]) -> AgentWokePayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.PLAN_UPDATED]) -> PlanUpdatedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.MCP_SERVER_READY]) -> McpServerReadyPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.MCP_SERVER_FAILED]) -> McpServerFailedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.MCP_SERVER_RESTARTING]
) -> McpServerRestartingPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.MCP_PROGRESS]) -> McpProgressPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.MCP_LOG]) -> McpLogPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.APPROVAL_REQUESTED]
) -> ApprovalRequestedPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.APPROVAL_RESOLVED]) -> ApprovalResolvedPayload | None: ...

@overload
def payload_of(
    event: AgentEvent, kind: Literal[EventKind.SANDBOX_UNAVAILABLE]
) -> SandboxUnavailablePayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.API_EVENT]) -> ApiEventPayload | None: ...

@overload
def payload_of(event: AgentEvent, kind: Literal[EventKind.API_WARNING]) -> ApiWarningPayload | None: ...
@overload
def payload_of(event: AgentEvent, kind: EventKind) -> EventPayload | None: ...


def payload_of(event: AgentEvent, kind: EventKind) -> EventPayload | None:
    """``event.payload`` typed as ``kind``'s payload when ``event`` is of that kind, else None.

    ``if (call := ta.payload_of(event, ta.EventKind.TOOL_CALL)) is not None:`` narrows
    ``call`` to ``ToolCallPayload``. Nothing is copied or checked at runtime: the
    payload is the event's own dict (shared with every other reader of the event, so
    do not change it).
    """
    if event.kind != kind:
        return None
    return cast(EventPayload, event.payload)
