"""trio_agent: a Trio-native runtime for coding agents on the OpenAI Responses API."""

from ._config import AgentConfig as AgentConfig
from ._config import ChatGptAuth as ChatGptAuth
from ._config import ChatGptAuthSnapshot as ChatGptAuthSnapshot
from ._config import History as History
from ._config import Responses as Responses
from ._config import Thinking as Thinking
from ._config import Transport as Transport
from ._errors import AgentClosed as AgentClosed
from ._errors import AgentError as AgentError
from ._errors import ApiError as ApiError
from ._errors import AuthenticationError as AuthenticationError
from ._errors import CheckpointLineageMismatch as CheckpointLineageMismatch
from ._errors import CheckpointMissing as CheckpointMissing
from ._errors import ConfigError as ConfigError
from ._errors import ConnectionFailed as ConnectionFailed
from ._errors import ConnectionLost as ConnectionLost
from ._errors import ForkBeforeCompletedTurn as ForkBeforeCompletedTurn
from ._errors import InvalidImageRequest as InvalidImageRequest
from ._errors import InvalidPrompt as InvalidPrompt
from ._errors import InvalidSessionSnapshot as InvalidSessionSnapshot
from ._errors import ProtocolError as ProtocolError
from ._errors import ResponsesError as ResponsesError
from ._errors import ResponseTimeout as ResponseTimeout
from ._errors import SteerQueueFull as SteerQueueFull
from ._errors import TurnCancelled as TurnCancelled
from ._errors import TurnFailed as TurnFailed
from ._errors import TurnNotCancellable as TurnNotCancellable
from ._errors import TurnNotSteerable as TurnNotSteerable
from ._errors import UsageLimitExceeded as UsageLimitExceeded
from ._errors import WorkspaceChanged as WorkspaceChanged
from ._event_payloads import EVENT_PAYLOADS as EVENT_PAYLOADS
from ._event_payloads import ApiEventPayload as ApiEventPayload
from ._event_payloads import ApiWarningPayload as ApiWarningPayload
from ._event_payloads import ApprovalChange as ApprovalChange
from ._event_payloads import ApprovalRequestedPayload as ApprovalRequestedPayload
from ._event_payloads import ApprovalResolvedPayload as ApprovalResolvedPayload
from ._event_payloads import AssistantDeltaPayload as AssistantDeltaPayload
from ._event_payloads import AssistantMessagePayload as AssistantMessagePayload
from ._event_payloads import EventPayload as EventPayload
from ._event_payloads import JsonValue as JsonValue
from ._event_payloads import McpServerFailedPayload as McpServerFailedPayload
from ._event_payloads import McpServerReadyPayload as McpServerReadyPayload
from ._event_payloads import ModelAttemptFailedPayload as ModelAttemptFailedPayload
from ._event_payloads import ModelAttemptRetryingPayload as ModelAttemptRetryingPayload
from ._event_payloads import ModelAttemptStartedPayload as ModelAttemptStartedPayload
from ._event_payloads import ModelCallCompletedPayload as ModelCallCompletedPayload
from ._event_payloads import ModelCallFailedPayload as ModelCallFailedPayload
from ._event_payloads import ModelCallStartedPayload as ModelCallStartedPayload
from ._event_payloads import ModelCompactionCompletedPayload as ModelCompactionCompletedPayload
from ._event_payloads import ModelCompactionFailedPayload as ModelCompactionFailedPayload
from ._event_payloads import ModelCompactionStartedPayload as ModelCompactionStartedPayload
from ._event_payloads import ModelConnectionCompletedPayload as ModelConnectionCompletedPayload
from ._event_payloads import ModelConnectionFailedPayload as ModelConnectionFailedPayload
from ._event_payloads import ModelConnectionStartedPayload as ModelConnectionStartedPayload
from ._event_payloads import ModelWarmupCompletedPayload as ModelWarmupCompletedPayload
from ._event_payloads import ModelWarmupFailedPayload as ModelWarmupFailedPayload
from ._event_payloads import ModelWarmupStartedPayload as ModelWarmupStartedPayload
from ._event_payloads import PlanStep as PlanStep
from ._event_payloads import PlanUpdatedPayload as PlanUpdatedPayload
from ._event_payloads import ReasoningSummaryDeltaPayload as ReasoningSummaryDeltaPayload
from ._event_payloads import RunCompletedPayload as RunCompletedPayload
from ._event_payloads import RunErrorPayload as RunErrorPayload
from ._event_payloads import RunFailedPayload as RunFailedPayload
from ._event_payloads import RunStartedPayload as RunStartedPayload
from ._event_payloads import RunSteeredPayload as RunSteeredPayload
from ._event_payloads import SandboxUnavailablePayload as SandboxUnavailablePayload
from ._event_payloads import SleepCompletedPayload as SleepCompletedPayload
from ._event_payloads import SleepStartedPayload as SleepStartedPayload
from ._event_payloads import TokenCounts as TokenCounts
from ._event_payloads import ToolCallPayload as ToolCallPayload
from ._event_payloads import ToolProgressPayload as ToolProgressPayload
from ._event_payloads import ToolResultPayload as ToolResultPayload
from ._event_payloads import payload_of as payload_of
from ._events import AgentEvent as AgentEvent
from ._events import AgentEvents as AgentEvents
from ._events import EventKind as EventKind
from ._events import EventsOverflowed as EventsOverflowed
from ._events import EventSubscription as EventSubscription
from ._events import write_jsonl as write_jsonl
from ._rollout import DurableSession as DurableSession
from ._rollout import RolloutConfig as RolloutConfig
from ._rollout import RolloutError as RolloutError
from ._rollout import RolloutWarning as RolloutWarning
from ._runtime import Agent as Agent
from ._runtime import AgentHandle as AgentHandle
from ._runtime import AgentStatistics as AgentStatistics
from ._runtime import Declined as Declined
from ._runtime import MailboxFull as MailboxFull
from ._runtime import Prompt as Prompt
from ._runtime import Rollout as Rollout
from ._runtime import Submission as Submission
from ._runtime import Turn as Turn
from ._runtime import TurnControl as TurnControl
from ._runtime import TurnResult as TurnResult
from ._runtime import TurnStatus as TurnStatus
from ._runtime import open_agent as open_agent
from ._session.snapshot import SessionSnapshot as SessionSnapshot
from ._threads import ThreadError as ThreadError
from ._threads import ThreadEvent as ThreadEvent
from ._threads import ThreadEvents as ThreadEvents
from ._threads import ThreadInfo as ThreadInfo
from ._threads import ThreadManager as ThreadManager
from ._threads import ThreadStatus as ThreadStatus
from ._threads import UnsubscribeStatus as UnsubscribeStatus
from ._threads import open_thread_manager as open_thread_manager
from ._tools import Handler as Handler
from ._tools import McpServer as McpServer
from ._tools import ToolContext as ToolContext
from ._tools import ToolDecorator as ToolDecorator
from ._tools import Tools as Tools
from ._tools import ToolSpec as ToolSpec
from ._tools import tool as tool
from ._tools._sandbox import SandboxUnavailable as SandboxUnavailable
from ._tools._security import ApprovalDecision as ApprovalDecision
from ._tools._security import ApprovalKind as ApprovalKind
from ._tools._security import ApprovalPolicy as ApprovalPolicy
from ._tools._security import ApprovalRequest as ApprovalRequest
from ._tools._security import Approvals as Approvals
from ._tools._security import ChangedFile as ChangedFile
from ._tools._security import Sandbox as Sandbox
from ._tools._security import SandboxMode as SandboxMode
from ._tracing import Tracing as Tracing

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022  # plain sorted() order, as tests/test_public_api.py pins it
    "Agent",
    "AgentClosed",
    "AgentConfig",
    "AgentError",
    "AgentEvent",
    "AgentEvents",
    "AgentHandle",
    "AgentStatistics",
    "ApiError",
    "ApiEventPayload",
    "ApiWarningPayload",
    "ApprovalChange",
    "ApprovalDecision",
    "ApprovalKind",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRequestedPayload",
    "ApprovalResolvedPayload",
    "Approvals",
    "AssistantDeltaPayload",
    "AssistantMessagePayload",
    "AuthenticationError",
    "ChangedFile",
    "ChatGptAuth",
    "ChatGptAuthSnapshot",
    "CheckpointLineageMismatch",
    "CheckpointMissing",
    "ConfigError",
    "ConnectionFailed",
    "ConnectionLost",
    "Declined",
    "DurableSession",
    "EVENT_PAYLOADS",
    "EventKind",
    "EventPayload",
    "EventSubscription",
    "EventsOverflowed",
    "ForkBeforeCompletedTurn",
    "Handler",
    "History",
    "InvalidImageRequest",
    "InvalidPrompt",
    "InvalidSessionSnapshot",
    "JsonValue",
    "MailboxFull",
    "McpServer",
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
    "Prompt",
    "ProtocolError",
    "ReasoningSummaryDeltaPayload",
    "ResponseTimeout",
    "Responses",
    "ResponsesError",
    "Rollout",
    "RolloutConfig",
    "RolloutError",
    "RolloutWarning",
    "RunCompletedPayload",
    "RunErrorPayload",
    "RunFailedPayload",
    "RunStartedPayload",
    "RunSteeredPayload",
    "Sandbox",
    "SandboxMode",
    "SandboxUnavailable",
    "SandboxUnavailablePayload",
    "SessionSnapshot",
    "SleepCompletedPayload",
    "SleepStartedPayload",
    "SteerQueueFull",
    "Submission",
    "Thinking",
    "ThreadError",
    "ThreadEvent",
    "ThreadEvents",
    "ThreadInfo",
    "ThreadManager",
    "ThreadStatus",
    "TokenCounts",
    "ToolCallPayload",
    "ToolContext",
    "ToolDecorator",
    "ToolProgressPayload",
    "ToolResultPayload",
    "ToolSpec",
    "Tools",
    "Tracing",
    "Transport",
    "Turn",
    "TurnCancelled",
    "TurnControl",
    "TurnFailed",
    "TurnNotCancellable",
    "TurnNotSteerable",
    "TurnResult",
    "TurnStatus",
    "UnsubscribeStatus",
    "UsageLimitExceeded",
    "WorkspaceChanged",
    "open_agent",
    "open_thread_manager",
    "payload_of",
    "tool",
    "write_jsonl",
]


def _own_public_names() -> None:
    # Public names report the package as their module (``trio_agent.Agent``, not
    # ``trio_agent._runtime._agent.Agent``): what users see in reprs, tracebacks and docs.
    # An attrs class's string annotations are resolved first, in the module that wrote
    # them (cattrs reads the resolved types; afterwards the names would be looked up here).
    import attrs

    for name in __all__:
        value = globals()[name]
        if not getattr(value, "__module__", "").startswith("trio_agent."):
            continue
        if isinstance(value, type) and attrs.has(value):
            try:
                attrs.resolve_types(value)
            except NameError:
                pass  # annotations that name TYPE_CHECKING-only types stay unresolved
        value.__module__ = __name__


_own_public_names()
