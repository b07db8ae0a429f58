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

# PEP 562: the declarations (about 4 ms of class bodies) are built on the first read of
# one of the names below (``_catalog``); ``from ._shared import JsonValue`` stays cheap.

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._catalog import EVENT_PAYLOADS as EVENT_PAYLOADS
    from ._catalog import AgentAsleepPayload as AgentAsleepPayload
    from ._catalog import AgentWokePayload as AgentWokePayload
    from ._catalog import ApiEventPayload as ApiEventPayload
    from ._catalog import ApiWarningPayload as ApiWarningPayload
    from ._catalog import ApprovalChange as ApprovalChange
    from ._catalog import ApprovalRequestedPayload as ApprovalRequestedPayload
    from ._catalog import ApprovalResolvedPayload as ApprovalResolvedPayload
    from ._catalog import AssistantDeltaPayload as AssistantDeltaPayload
    from ._catalog import AssistantMessagePayload as AssistantMessagePayload
    from ._catalog import EventPayload as EventPayload
    from ._catalog import JsonValue as JsonValue
    from ._catalog import McpLogPayload as McpLogPayload
    from ._catalog import McpProgressPayload as McpProgressPayload
    from ._catalog import McpServerFailedPayload as McpServerFailedPayload
    from ._catalog import McpServerReadyPayload as McpServerReadyPayload
    from ._catalog import McpServerRestartingPayload as McpServerRestartingPayload
    from ._catalog import ModelAttemptFailedPayload as ModelAttemptFailedPayload
    from ._catalog import ModelAttemptRetryingPayload as ModelAttemptRetryingPayload
    from ._catalog import ModelAttemptStartedPayload as ModelAttemptStartedPayload
    from ._catalog import ModelCallCompletedPayload as ModelCallCompletedPayload
    from ._catalog import ModelCallFailedPayload as ModelCallFailedPayload
    from ._catalog import ModelCallStartedPayload as ModelCallStartedPayload
    from ._catalog import ModelCompactionCompletedPayload as ModelCompactionCompletedPayload
    from ._catalog import ModelCompactionFailedPayload as ModelCompactionFailedPayload
    from ._catalog import ModelCompactionFallbackPayload as ModelCompactionFallbackPayload
    from ._catalog import ModelCompactionStartedPayload as ModelCompactionStartedPayload
    from ._catalog import ModelConnectionCompletedPayload as ModelConnectionCompletedPayload
    from ._catalog import ModelConnectionFailedPayload as ModelConnectionFailedPayload
    from ._catalog import ModelConnectionStartedPayload as ModelConnectionStartedPayload
    from ._catalog import ModelWarmupCompletedPayload as ModelWarmupCompletedPayload
    from ._catalog import ModelWarmupFailedPayload as ModelWarmupFailedPayload
    from ._catalog import ModelWarmupStartedPayload as ModelWarmupStartedPayload
    from ._catalog import PlanStep as PlanStep
    from ._catalog import PlanUpdatedPayload as PlanUpdatedPayload
    from ._catalog import ReasoningSummaryDeltaPayload as ReasoningSummaryDeltaPayload
    from ._catalog import RunCompletedPayload as RunCompletedPayload
    from ._catalog import RunErrorPayload as RunErrorPayload
    from ._catalog import RunFailedPayload as RunFailedPayload
    from ._catalog import RunStartedPayload as RunStartedPayload
    from ._catalog import RunSteeredPayload as RunSteeredPayload
    from ._catalog import SandboxUnavailablePayload as SandboxUnavailablePayload
    from ._catalog import SleepCompletedPayload as SleepCompletedPayload
    from ._catalog import SleepStartedPayload as SleepStartedPayload
    from ._catalog import TokenCounts as TokenCounts
    from ._catalog import ToolBlockedPayload as ToolBlockedPayload
    from ._catalog import ToolCallPayload as ToolCallPayload
    from ._catalog import ToolProgressPayload as ToolProgressPayload
    from ._catalog import ToolResultPayload as ToolResultPayload
    from ._catalog import payload_of as payload_of

__all__ = [
    "EVENT_PAYLOADS",
    "AgentAsleepPayload",
    "AgentWokePayload",
    "ApiEventPayload",
    "ApiWarningPayload",
    "ApprovalChange",
    "ApprovalRequestedPayload",
    "ApprovalResolvedPayload",
    "AssistantDeltaPayload",
    "AssistantMessagePayload",
    "EventPayload",
    "JsonValue",
    "McpLogPayload",
    "McpProgressPayload",
    "McpServerFailedPayload",
    "McpServerReadyPayload",
    "McpServerRestartingPayload",
    "ModelAttemptFailedPayload",
    "ModelAttemptRetryingPayload",
    "ModelAttemptStartedPayload",
    "ModelCallCompletedPayload",
    "ModelCallFailedPayload",
    "ModelCallStartedPayload",
    "ModelCompactionCompletedPayload",
    "ModelCompactionFailedPayload",
    "ModelCompactionFallbackPayload",
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
    "ToolBlockedPayload",
    "ToolCallPayload",
    "ToolProgressPayload",
    "ToolResultPayload",
    "payload_of",
]

if not TYPE_CHECKING:  # a module __getattr__ would make a type checker accept any name

    def __getattr__(name: str) -> Any:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from . import _catalog

        value = getattr(_catalog, name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
