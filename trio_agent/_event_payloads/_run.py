"""Payloads of a turn's lifecycle and of the assistant's text (``run.*``, ``assistant.*``,
``reasoning.summary.delta``), and of an idle agent's sleep between turns
(``agent.asleep``, ``agent.woke``). Emitted by ``_runtime/_turns/_reporter.py``,
``_runtime/_model/_call_events.py`` and ``_runtime/_turns/_idle_sleep.py``; nanocodex
sec. 3.2 and 3.3."""

from typing import Literal, NotRequired, TypedDict

from ._shared import Effort, TokenCounts, TransportName

__all__ = [
    "AgentAsleepPayload",
    "AgentWokePayload",
    "AssistantDeltaPayload",
    "AssistantMessagePayload",
    "ReasoningSummaryDeltaPayload",
    "RunCompletedPayload",
    "RunErrorPayload",
    "RunFailedPayload",
    "RunStartedPayload",
    "RunSteeredPayload",
]


class RunStartedPayload(TypedDict):
    """A turn starts running. A queued turn cancelled before it ran emits it too, just
    before its ``run.failed``."""

    mode: Literal["openai_model"]
    """Always ``"openai_model"``."""
    model: str
    """The model the turn uses."""
    reasoning_mode: Literal["standard"]
    """Always ``"standard"``."""
    effort: Effort
    """The reasoning effort of the turn, as it was when the prompt was accepted."""
    transport: TransportName
    """How the agent talks to the Responses API (``ta.Transport``'s value)."""
    orchestration: Literal["local_code_mode"]
    """Always ``"local_code_mode"``."""
    websocket_url: str
    """The endpoint of that transport without its query: the WebSocket URL, or
    ``<api_base_url>/responses`` over HTTPS."""
    workspace: str
    """The workspace directory, absolute."""
    instruction_bytes: int
    """UTF-8 size of the prompt's text (of the JSON of its items, or of the mail that
    started the turn, when it has no text)."""


class RunSteeredPayload(TypedDict):
    """A steer joined the running turn at a model boundary (it is in the next request)."""

    steer_index: int
    """Which steer of this turn it is, from 1."""
    instruction_bytes: int
    """UTF-8 size of the steer's text."""


class RunErrorPayload(TypedDict):
    """A turn failed; emitted just before its ``run.failed`` (a cancelled turn emits none:
    its ``run.failed`` carries the ``reason``)."""

    message: str
    """What went wrong (credentials the server echoed are redacted)."""


class _RunEnd(TypedDict):
    """The fields both terminal payloads carry (nanocodex sec. 3.3). Transport counters
    are the delta since the previous terminal event of a turn that ran, so the first
    turn includes the startup warmup; a turn that never ran reports zeros."""

    model: str
    """The model the turn used."""
    reasoning_mode: Literal["standard"]
    """Always ``"standard"``."""
    effort: Effort
    """The reasoning effort of the turn."""
    transport: TransportName
    """How the agent talks to the Responses API."""
    orchestration: Literal["local_code_mode"]
    """Always ``"local_code_mode"``."""
    duration_ms: int
    """Time from the turn's start to this event, in milliseconds."""
    duration_ns: int
    """The same, in nanoseconds (Trio's clock)."""
    model_calls: int
    """Generation requests of the turn (warmup and compaction excluded)."""
    steers: int
    """Steers that joined the turn."""
    compactions: int
    """Compaction requests the turn started."""
    tool_calls: int
    """Tool calls: top-level ones (unsupported ones included) plus nested ``exec`` calls."""
    connection_attempts: int
    """WebSocket connections attempted."""
    websocket_reconnects: int
    """Of those, connections that were not the agent's first."""
    response_attempts: int
    """Requests sent: every attempt, the warmup and retries included."""
    response_retries: int
    """Attempts that were retries."""
    connection_duration_ns: int
    """Time spent opening connections."""
    retry_backoff_duration_ns: int
    """Time spent waiting between attempts."""
    model_duration_ns: int
    """Time spent in generation and compaction calls, failed ones included."""
    warmup_duration_ns: int
    """Time spent on the warmup request."""
    tool_work_duration_ns: int
    """Summed durations of the nested ``exec`` calls."""
    tool_wall_duration_ns: int
    """Summed wall time of the top-level tool calls."""
    usage: TokenCounts
    """Tokens of the turn's generation and compaction responses."""
    warmup_usage: TokenCounts
    """Tokens of the warmup response."""
    last_response_id: str | None
    """The id of the turn's last response, or None when it has none."""
    cost_usd: None
    """Always None: the Responses API reports no cost."""
    cost_status: Literal["not_reported_by_responses_api"]
    """Why ``cost_usd`` is None."""


class RunCompletedPayload(_RunEnd):
    """The turn finished: its terminal event (exactly one per turn)."""

    status: Literal["completed"]
    """Always ``"completed"``."""


class RunFailedPayload(_RunEnd):
    """The turn failed or was cancelled: its terminal event (exactly one per turn)."""

    status: Literal["failed", "cancelled"]
    """``"cancelled"`` when ``turn.cancel()`` (or the enclosing scope) stopped it, else
    ``"failed"`` (after a ``run.error``)."""
    reason: NotRequired[str]
    """Cancelled turns only (always there): why, e.g. ``"turn 1 was cancelled"``."""


class AssistantDeltaPayload(TypedDict):
    """A piece of the assistant's output text arrived (``response.output_text.delta``)."""

    model_call_index: NotRequired[int]
    """Which model call of the turn produced it, from 1 (absent for the warmup)."""
    item_id: NotRequired[str]
    """The id of the message item, when the server gave one."""
    phase: NotRequired[str]
    """The message's phase as the server labelled it (``"commentary"`` or
    ``"final_answer"``), when it did."""
    text: str
    """The new text."""


class AssistantMessagePayload(TypedDict):
    """An assistant message is complete (``response.output_item.done``)."""

    model_call_index: NotRequired[int]
    """Which model call of the turn produced it, from 1 (absent for the warmup)."""
    item_id: NotRequired[str]
    """The id of the message item, when the server gave one."""
    phase: NotRequired[str]
    """The message's phase as the server labelled it, when it did."""
    text: str
    """The message's whole text (its ``output_text`` parts, joined)."""


class ReasoningSummaryDeltaPayload(TypedDict):
    """A piece of a reasoning summary arrived."""

    model_call_index: int | None
    """Which model call of the turn produced it, from 1 (None for the warmup)."""
    text: str
    """The new summary text."""


class AgentAsleepPayload(TypedDict):
    """The idle agent fell asleep (``Agent.sleep``): mail will wake it into a turn of its
    own, a turn accepted otherwise wakes it, or its time runs out."""

    seconds: float | None
    """How long it sleeps at most; None: until something wakes it."""


class AgentWokePayload(TypedDict):
    """The agent's sleep ended, for ``reason``; a wake-up turn's own events follow."""

    reason: Literal["mail", "turn", "timeout", "cancelled", "closed"]
    """``mail``: mail woke it into a turn (``turn_id``); ``turn``: a turn was accepted
    (a prompt, ``submit``, ``start_if_idle``, ``compact``; ``turn_id``); ``timeout``: its
    time ran out and nothing else happens; ``cancelled``: ``Sleep.cancel()``;
    ``closed``: the agent's block is closing."""
    slept_ns: int
    """How long it slept."""
    turn_id: NotRequired[int]
    """The turn it woke for (``mail`` and ``turn``)."""
