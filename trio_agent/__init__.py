"""trio_agent: a Trio-native runtime for coding agents on the OpenAI Responses API."""

# What ``import trio_agent`` loads (issue 13 item 4; ``tests/test_lean_import.py`` pins
# it): the modules an agent needs to open and run -- configuration, errors, events,
# tools, the runtime (``_EAGER``). The rest -- the thread manager, durable rollouts,
# snapshots, MCP server configuration, tracing settings, the typed event payloads and
# the values only some calls return (``AgentStatistics``, ``Submission``, ``Declined``,
# ``ToolContext``) -- waits for the first read of one of its names (PEP 562
# ``__getattr__`` below) or the first call that needs it: an agent that does not use
# them never imports them. Type checkers read the imports under ``TYPE_CHECKING``;
# ``_SOURCES`` tells the interpreter the same (``tests/test_public_api.py`` checks that
# the two agree).

import importlib as _importlib
import sys as _sys
import typing as _typing

import attrs as _attrs

if _typing.TYPE_CHECKING:
    from ._base.approval_request import ApprovalRequest as ApprovalRequest
    from ._base.approval_request import ChangedFile as ChangedFile
    from ._config import AgentConfig as AgentConfig
    from ._config import ChatGptAuth as ChatGptAuth
    from ._config import ChatGptAuthSnapshot as ChatGptAuthSnapshot
    from ._config import History as History
    from ._config import Profile as Profile
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
    from ._event_payloads import AgentAsleepPayload as AgentAsleepPayload
    from ._event_payloads import AgentWokePayload as AgentWokePayload
    from ._event_payloads import ApiEventPayload as ApiEventPayload
    from ._event_payloads import ApiWarningPayload as ApiWarningPayload
    from ._event_payloads import ApprovalChange as ApprovalChange
    from ._event_payloads import ApprovalRequestedPayload as ApprovalRequestedPayload
    from ._event_payloads import ApprovalResolvedPayload as ApprovalResolvedPayload
    from ._event_payloads import AssistantDeltaPayload as AssistantDeltaPayload
    from ._event_payloads import AssistantMessagePayload as AssistantMessagePayload
    from ._event_payloads import EventPayload as EventPayload
    from ._event_payloads import JsonValue as JsonValue
    from ._event_payloads import McpLogPayload as McpLogPayload
    from ._event_payloads import McpProgressPayload as McpProgressPayload
    from ._event_payloads import McpServerFailedPayload as McpServerFailedPayload
    from ._event_payloads import McpServerReadyPayload as McpServerReadyPayload
    from ._event_payloads import McpServerRestartingPayload as McpServerRestartingPayload
    from ._event_payloads import ModelAttemptFailedPayload as ModelAttemptFailedPayload
    from ._event_payloads import ModelAttemptRetryingPayload as ModelAttemptRetryingPayload
    from ._event_payloads import ModelAttemptStartedPayload as ModelAttemptStartedPayload
    from ._event_payloads import ModelCallCompletedPayload as ModelCallCompletedPayload
    from ._event_payloads import ModelCallFailedPayload as ModelCallFailedPayload
    from ._event_payloads import ModelCallStartedPayload as ModelCallStartedPayload
    from ._event_payloads import ModelCompactionCompletedPayload as ModelCompactionCompletedPayload
    from ._event_payloads import ModelCompactionFailedPayload as ModelCompactionFailedPayload
    from ._event_payloads import ModelCompactionFallbackPayload as ModelCompactionFallbackPayload
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
    from ._event_payloads import ToolBlockedPayload as ToolBlockedPayload
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
    from ._rollout import RolloutConfig as RolloutConfig
    from ._rollout import RolloutError as RolloutError
    from ._rollout import RolloutWarning as RolloutWarning
    from ._rollout._durable import DurableSession as DurableSession
    from ._runtime import Agent as Agent
    from ._runtime import AgentHandle as AgentHandle
    from ._runtime import MailboxFull as MailboxFull
    from ._runtime import Prompt as Prompt
    from ._runtime import Rollout as Rollout
    from ._runtime import Turn as Turn
    from ._runtime import TurnControl as TurnControl
    from ._runtime import TurnResult as TurnResult
    from ._runtime import TurnStatus as TurnStatus
    from ._runtime import open_agent as open_agent
    from ._runtime._statistics import AgentStatistics as AgentStatistics
    from ._runtime._turns._idle_sleep import Sleep as Sleep
    from ._runtime._turns._idle_sleep import SleepRefused as SleepRefused
    from ._runtime._turns._idle_sleep import Wakeup as Wakeup
    from ._runtime._turns._submission import Declined as Declined
    from ._runtime._turns._submission import Submission as Submission
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
    from ._tools import ToolDecorator as ToolDecorator
    from ._tools import Tools as Tools
    from ._tools import ToolSpec as ToolSpec
    from ._tools import tool as tool
    from ._tools._context import ToolContext as ToolContext
    from ._tools._mcp_config import McpServer as McpServer
    from ._tools._sandbox import SandboxUnavailable as SandboxUnavailable
    from ._tools._security import ApprovalDecision as ApprovalDecision
    from ._tools._security import ApprovalKind as ApprovalKind
    from ._tools._security import ApprovalPolicy as ApprovalPolicy
    from ._tools._security import Approvals as Approvals
    from ._tools._security import Sandbox as Sandbox
    from ._tools._security import SandboxMode as SandboxMode
    from ._tracing._settings import Tracing as Tracing
    from ._wire.output_schema import OutputSchema as OutputSchema

# The modules of ``_EAGER``, as plain import statements (``-X importtime`` then shows
# each on its own line; ``importlib.import_module`` would fold them into this one).
from . import _config, _errors, _events, _runtime, _tools, _wiring  # noqa: F401  # _wiring: fills _base/links.py
from ._tools import _sandbox, _security  # noqa: F401

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022  # plain sorted() order, as tests/test_public_api.py pins it
    "Agent",
    "AgentAsleepPayload",
    "AgentClosed",
    "AgentConfig",
    "AgentError",
    "AgentEvent",
    "AgentEvents",
    "AgentHandle",
    "AgentStatistics",
    "AgentWokePayload",
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
    "McpLogPayload",
    "McpProgressPayload",
    "McpServer",
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
    "OutputSchema",
    "PlanStep",
    "PlanUpdatedPayload",
    "Profile",
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
    "Sleep",
    "SleepCompletedPayload",
    "SleepRefused",
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
    "ToolBlockedPayload",
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
    "Wakeup",
    "WorkspaceChanged",
    "open_agent",
    "open_thread_manager",
    "payload_of",
    "tool",
    "write_jsonl",
]

# Where each public name is defined, by module.
_SOURCES: dict[str, tuple[str, ...]] = {
    "._base.approval_request": ("ApprovalRequest", "ChangedFile"),
    "._config": (
        "AgentConfig", "ChatGptAuth", "ChatGptAuthSnapshot", "History", "Profile", "Responses", "Thinking", "Transport",
    ),
    "._errors": (
        "AgentClosed", "AgentError", "ApiError", "AuthenticationError", "CheckpointLineageMismatch",
        "CheckpointMissing", "ConfigError", "ConnectionFailed", "ConnectionLost", "ForkBeforeCompletedTurn",
        "InvalidImageRequest", "InvalidPrompt", "InvalidSessionSnapshot", "ProtocolError", "ResponsesError",
        "ResponseTimeout", "SteerQueueFull", "TurnCancelled", "TurnFailed", "TurnNotCancellable", "TurnNotSteerable",
        "UsageLimitExceeded", "WorkspaceChanged",
    ),
    "._event_payloads": (
        "EVENT_PAYLOADS", "AgentAsleepPayload", "AgentWokePayload", "ApiEventPayload", "ApiWarningPayload",
        "ApprovalChange", "ApprovalRequestedPayload", "ApprovalResolvedPayload", "AssistantDeltaPayload",
        "AssistantMessagePayload", "EventPayload", "JsonValue",
        "McpLogPayload", "McpProgressPayload", "McpServerFailedPayload", "McpServerReadyPayload",
        "McpServerRestartingPayload", "ModelAttemptFailedPayload", "ModelAttemptRetryingPayload",
        "ModelAttemptStartedPayload", "ModelCallCompletedPayload", "ModelCallFailedPayload", "ModelCallStartedPayload",
        "ModelCompactionCompletedPayload", "ModelCompactionFailedPayload", "ModelCompactionFallbackPayload",
        "ModelCompactionStartedPayload", "ModelConnectionCompletedPayload", "ModelConnectionFailedPayload",
        "ModelConnectionStartedPayload", "ModelWarmupCompletedPayload", "ModelWarmupFailedPayload",
        "ModelWarmupStartedPayload", "PlanStep", "PlanUpdatedPayload", "ReasoningSummaryDeltaPayload",
        "RunCompletedPayload", "RunErrorPayload", "RunFailedPayload", "RunStartedPayload", "RunSteeredPayload",
        "SandboxUnavailablePayload", "SleepCompletedPayload", "SleepStartedPayload", "TokenCounts",
        "ToolBlockedPayload", "ToolCallPayload", "ToolProgressPayload", "ToolResultPayload", "payload_of",
    ),
    "._events": ("AgentEvent", "AgentEvents", "EventKind", "EventsOverflowed", "EventSubscription", "write_jsonl",),
    "._rollout": ("RolloutConfig", "RolloutError", "RolloutWarning",),
    "._rollout._durable": ("DurableSession",),  # the resume path (a run keeping a new session: never)
    "._runtime": (
        "Agent", "AgentHandle", "MailboxFull", "Prompt", "Rollout", "Turn", "TurnControl", "TurnResult", "TurnStatus",
        "open_agent",
    ),
    "._runtime._statistics": ("AgentStatistics",),
    "._runtime._turns._submission": ("Declined", "Submission"),
    "._runtime._turns._idle_sleep": ("Sleep", "SleepRefused", "Wakeup"),
    "._session.snapshot": ("SessionSnapshot",),
    "._threads": (
        "ThreadError", "ThreadEvent", "ThreadEvents", "ThreadInfo", "ThreadManager", "ThreadStatus",
        "UnsubscribeStatus", "open_thread_manager",
    ),
    "._tools": ("Handler", "ToolDecorator", "Tools", "ToolSpec", "tool",),
    "._tools._context": ("ToolContext",),
    "._tools._mcp_config": ("McpServer",),
    "._tools._sandbox": ("SandboxUnavailable",),
    "._tools._security": ("ApprovalDecision", "ApprovalKind", "ApprovalPolicy", "Approvals", "Sandbox", "SandboxMode",),
    "._tracing._settings": ("Tracing",),
    "._wire.output_schema": ("OutputSchema",),
}
# Imported with the package: what opening and running an agent imports anyway.
_EAGER = ("._config", "._errors", "._events", "._runtime", "._tools", "._tools._sandbox", "._tools._security")


def _publish(source: str) -> None:
    """Import ``source`` and make its public names report this package as their module
    (``trio_agent.Agent``, not ``trio_agent._runtime._agent.Agent``: what users see in
    reprs, tracebacks and docs). Everything but the attrs classes is bound here at once."""
    module = _importlib.import_module(source, __name__)
    for name in _SOURCES[source]:
        value = getattr(module, name)
        origin = getattr(value, "__module__", "")
        if isinstance(value, type) and _attrs.has(value):
            _DEFERRED[name] = (value, origin)
        else:
            globals()[name] = value
        if origin.startswith("trio_agent."):
            value.__module__ = __name__


# Public attrs classes wait for their first read from the package to be bound here,
# because that is when their string annotations (``from __future__ import
# annotations``) are resolved, in the module that wrote them -- once ``__module__``
# says ``trio_agent``, ``attrs.resolve_types`` and cattrs would look the names up in
# this module and fail. Resolving every class at import cost about 3 ms; now
# ``attrs.fields(trio_agent.Sandbox).mode.type`` is ``SandboxMode`` as before, from the
# first ``trio_agent.Sandbox`` (or ``from trio_agent import Sandbox``) on. A class
# reached some other way first (``type(config.sandbox)``) shows the strings until then.
# Annotations naming ``TYPE_CHECKING``-only types stay unresolved, as before.
_DEFERRED: dict[str, tuple[type, str]] = {}  # name -> (attrs class, the module that defined it)
_SOURCE_OF = {name: source for source, names in _SOURCES.items() for name in names}
_published: set[str] = set()

for _source in _EAGER:
    _publish(_source)
    _published.add(_source)
del _source

if not _typing.TYPE_CHECKING:  # a module __getattr__ would make a type checker accept any name

    def __getattr__(name: str) -> object:
        source = _SOURCE_OF.get(name)
        if source is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        if source not in _published:
            try:
                _publish(source)
            except Exception as exc:  # say which public name needed the module, keep the cause
                raise ImportError(
                    f"trio_agent.{name} could not be loaded: importing trio_agent{source} failed ({exc!r})",
                    name=f"trio_agent{source}",
                ) from exc
            _published.add(source)
        deferred = _DEFERRED.get(name)
        if deferred is not None:
            cls, origin = deferred
            try:
                _attrs.resolve_types(cls, globalns=vars(_sys.modules[origin]))
            except NameError:
                pass  # annotations that name TYPE_CHECKING-only types stay unresolved
            globals()[name] = cls
        return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
