"""The catalog behind ``trio_agent._event_payloads``: every payload declaration by name,
and ``EVENT_PAYLOADS``. The package's ``__init__`` loads this module on the first read
of one of these names, so that importing ``_shared`` (``JsonValue``, which tools, the
wire and snapshots use) does not build every ``TypedDict``."""

from collections.abc import Iterator, Mapping

from .._events import EventKind
from ._access import EventPayload as EventPayload
from ._access import payload_of as payload_of
from ._approval import ApprovalChange as ApprovalChange
from ._approval import ApprovalRequestedPayload as ApprovalRequestedPayload
from ._approval import ApprovalResolvedPayload as ApprovalResolvedPayload
from ._approval import SandboxUnavailablePayload as SandboxUnavailablePayload
from ._model import ApiEventPayload as ApiEventPayload
from ._model import ApiWarningPayload as ApiWarningPayload
from ._model import ModelAttemptFailedPayload as ModelAttemptFailedPayload
from ._model import ModelAttemptRetryingPayload as ModelAttemptRetryingPayload
from ._model import ModelAttemptStartedPayload as ModelAttemptStartedPayload
from ._model import ModelCallCompletedPayload as ModelCallCompletedPayload
from ._model import ModelCallFailedPayload as ModelCallFailedPayload
from ._model import ModelCallStartedPayload as ModelCallStartedPayload
from ._model import ModelCompactionCompletedPayload as ModelCompactionCompletedPayload
from ._model import ModelCompactionFailedPayload as ModelCompactionFailedPayload
from ._model import ModelCompactionFallbackPayload as ModelCompactionFallbackPayload
from ._model import ModelCompactionStartedPayload as ModelCompactionStartedPayload
from ._model import ModelConnectionCompletedPayload as ModelConnectionCompletedPayload
from ._model import ModelConnectionFailedPayload as ModelConnectionFailedPayload
from ._model import ModelConnectionStartedPayload as ModelConnectionStartedPayload
from ._model import ModelWarmupCompletedPayload as ModelWarmupCompletedPayload
from ._model import ModelWarmupFailedPayload as ModelWarmupFailedPayload
from ._model import ModelWarmupStartedPayload as ModelWarmupStartedPayload
from ._run import AgentAsleepPayload as AgentAsleepPayload
from ._run import AgentWokePayload as AgentWokePayload
from ._run import AssistantDeltaPayload as AssistantDeltaPayload
from ._run import AssistantMessagePayload as AssistantMessagePayload
from ._run import ReasoningSummaryDeltaPayload as ReasoningSummaryDeltaPayload
from ._run import RunCompletedPayload as RunCompletedPayload
from ._run import RunErrorPayload as RunErrorPayload
from ._run import RunFailedPayload as RunFailedPayload
from ._run import RunStartedPayload as RunStartedPayload
from ._run import RunSteeredPayload as RunSteeredPayload
from ._shared import JsonValue as JsonValue
from ._shared import TokenCounts as TokenCounts
from ._tool import McpLogPayload as McpLogPayload
from ._tool import McpProgressPayload as McpProgressPayload
from ._tool import McpServerFailedPayload as McpServerFailedPayload
from ._tool import McpServerReadyPayload as McpServerReadyPayload
from ._tool import McpServerRestartingPayload as McpServerRestartingPayload
from ._tool import PlanStep as PlanStep
from ._tool import PlanUpdatedPayload as PlanUpdatedPayload
from ._tool import SleepCompletedPayload as SleepCompletedPayload
from ._tool import SleepStartedPayload as SleepStartedPayload
from ._tool import ToolBlockedPayload as ToolBlockedPayload
from ._tool import ToolCallPayload as ToolCallPayload
from ._tool import ToolProgressPayload as ToolProgressPayload
from ._tool import ToolResultPayload as ToolResultPayload

# Re-exported (``X as X``) for the package's ``__getattr__``; its ``__all__`` lists them.

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
    EventKind.TOOL_BLOCKED: ToolBlockedPayload,
    EventKind.MODEL_WARMUP_STARTED: ModelWarmupStartedPayload,
    EventKind.MODEL_WARMUP_COMPLETED: ModelWarmupCompletedPayload,
    EventKind.MODEL_WARMUP_FAILED: ModelWarmupFailedPayload,
    EventKind.MODEL_CALL_STARTED: ModelCallStartedPayload,
    EventKind.MODEL_CALL_COMPLETED: ModelCallCompletedPayload,
    EventKind.MODEL_CALL_FAILED: ModelCallFailedPayload,
    EventKind.MODEL_COMPACTION_STARTED: ModelCompactionStartedPayload,
    EventKind.MODEL_COMPACTION_COMPLETED: ModelCompactionCompletedPayload,
    EventKind.MODEL_COMPACTION_FAILED: ModelCompactionFailedPayload,
    EventKind.MODEL_COMPACTION_FALLBACK: ModelCompactionFallbackPayload,
    EventKind.MODEL_ATTEMPT_STARTED: ModelAttemptStartedPayload,
    EventKind.MODEL_ATTEMPT_FAILED: ModelAttemptFailedPayload,
    EventKind.MODEL_ATTEMPT_RETRYING: ModelAttemptRetryingPayload,
    EventKind.MODEL_CONNECTION_STARTED: ModelConnectionStartedPayload,
    EventKind.MODEL_CONNECTION_COMPLETED: ModelConnectionCompletedPayload,
    EventKind.MODEL_CONNECTION_FAILED: ModelConnectionFailedPayload,
    EventKind.SLEEP_STARTED: SleepStartedPayload,
    EventKind.SLEEP_COMPLETED: SleepCompletedPayload,
    EventKind.AGENT_ASLEEP: AgentAsleepPayload,
    EventKind.AGENT_WOKE: AgentWokePayload,
    EventKind.PLAN_UPDATED: PlanUpdatedPayload,
    EventKind.MCP_SERVER_READY: McpServerReadyPayload,
    EventKind.MCP_SERVER_FAILED: McpServerFailedPayload,
    EventKind.MCP_SERVER_RESTARTING: McpServerRestartingPayload,
    EventKind.MCP_PROGRESS: McpProgressPayload,
    EventKind.MCP_LOG: McpLogPayload,
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
