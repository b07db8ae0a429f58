"""Payloads of the model side: warmup, calls, compactions, attempts, connections and
the raw API traffic (``model.*``, ``api.*``). Emitted by ``_runtime/_model/_client.py``,
``_runtime/_model/_sampling.py``, ``_runtime/_model/_call_events.py``, ``_runtime/_model/_connections.py``
and ``_runtime/_model/_response_feed.py``; nanocodex sec. 3.2."""

from typing import Literal, NotRequired, TypedDict

from ._shared import ApiPhase, CompactionMode, ConnectionPurpose, Effort, FailurePhase, JsonObject, TransportName

__all__ = [
    "ApiEventPayload",
    "ApiWarningPayload",
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
]


class ModelWarmupStartedPayload(TypedDict):
    """The agent starts its startup warmup (a ``generate: false`` request that sends the
    prompt prefix ahead of the first prompt). No ``turn_id``."""

    model: str
    """The model warmed up."""
    prompt_cache_key: str
    """The prompt cache key the requests carry."""


class ModelWarmupCompletedPayload(TypedDict):
    """The warmup succeeded, or another agent had already warmed the same prefix
    (``source: "shared_prefix"``, with a shared prompt cache). No ``turn_id``."""

    source: Literal["response", "shared_prefix"]
    """``"response"``: this agent's warmup request answered; ``"shared_prefix"``: no
    request of its own was needed (the socket is opened all the same, before this
    event, so that the first request does not wait for it)."""
    response_id: NotRequired[str]
    """The warmup response's id (``source: "response"`` only)."""
    attempt: NotRequired[int]
    """Always 1: the warmup is tried once (``source: "response"`` only)."""
    connection_generation: NotRequired[int]
    """The connection it went over (``source: "response"`` only)."""
    duration_ns: int
    """How long the warmup took."""
    usage: JsonObject | None
    """The server's ``usage`` object, verbatim; None when there is none."""


class ModelWarmupFailedPayload(TypedDict):
    """The warmup failed; the first prompt then replays in full on a new connection.
    No ``turn_id``."""

    duration_ns: int
    """How long the warmup took before it failed."""
    error: str
    """What went wrong."""


class ModelCallStartedPayload(TypedDict):
    """A generation call starts (it may take several attempts)."""

    call_index: int
    """Which model call of the turn it is, from 1."""
    model: str
    """The model called."""
    reasoning_mode: Literal["standard"]
    """Always ``"standard"``."""
    effort: Effort
    """The reasoning effort requested."""
    previous_response_id: NotRequired[str]
    """The response the request chains on, when it chains."""


class ModelCallCompletedPayload(TypedDict):
    """A generation call got its whole response."""

    call_index: int
    """Which model call of the turn it is, from 1."""
    model: str
    """The model called."""
    response_id: str
    """The response's id."""
    attempt: int
    """Which attempt succeeded, from 1."""
    connection_generation: int
    """The connection that carried it (0 over HTTPS)."""
    status: str
    """The response's status: the server's (``"completed"``), ``"incomplete"`` for a
    response the server stopped on an interrupt, ``"interrupted"`` for one cut short."""
    duration_ns: int
    """The whole call, every attempt and backoff included."""
    time_to_first_event_ns: int
    """From sending the successful attempt to its first server frame."""
    time_to_first_output_ns: int | None
    """From sending the successful attempt to its first output text, if there was any."""
    tool_calls: int
    """Tool calls in this response."""
    usage: JsonObject | None
    """The server's ``usage`` object, verbatim; None when there is none."""


class ModelCallFailedPayload(TypedDict):
    """A generation call failed after its last attempt (the turn fails)."""

    call_index: int
    """Which model call of the turn it is, from 1."""
    model: str
    """The model called."""
    duration_ns: int
    """The whole call, every attempt and backoff included."""
    error: str
    """What went wrong."""


class ModelCompactionStartedPayload(TypedDict):
    """A compaction starts: the context grew past the compaction limit, or
    ``Agent.compact()`` asked for one. It ends with ``model.compaction.completed`` or
    ``.failed`` (or the turn's cancellation); ``model.compaction.fallback`` comes
    between them when the server offers no remote compaction."""

    mode: CompactionMode
    """How it compacts first: ``"remote"`` (a ``compaction_trigger`` request answered by
    one ``compaction`` item; every agent starts so) or ``"local"`` (a summarization
    request; once this agent's server has declined a remote compaction)."""
    after_model_call_index: int
    """The model call after which it runs."""
    active_context_tokens: int
    """The tokens of the context that triggered it."""
    auto_compact_token_limit: int
    """The limit those tokens passed."""
    previous_response_id: str | None
    """The response the request chains on, or None for a full replay."""


class ModelCompactionCompletedPayload(TypedDict):
    """The compaction succeeded and history is replaced: by the returned ``compaction``
    item (remote), or by the recent user messages and the summary (local)."""

    mode: CompactionMode
    """How it compacted: ``"remote"`` or ``"local"`` (after a fallback, ``"local"``)."""
    after_model_call_index: int
    """The model call after which it ran."""
    response_id: str
    """The id of the response that compacted (the summarization response, when local)."""
    attempt: int
    """Which attempt succeeded, from 1."""
    connection_generation: int
    """The connection that carried it (0 over HTTPS)."""
    status: str
    """The response's status (see ``model.call.completed``)."""
    duration_ns: int
    """The whole request, every attempt and backoff included."""
    usage: JsonObject | None
    """The server's ``usage`` object, verbatim; None when there is none."""


class ModelCompactionFailedPayload(TypedDict):
    """The compaction failed (the turn fails; history is unchanged)."""

    after_model_call_index: int
    """The model call after which it ran."""
    duration_ns: int
    """The whole request, every attempt and backoff included."""
    error: str
    """What went wrong."""


class ModelCompactionFallbackPayload(TypedDict):
    """The server offers no remote compaction, so this agent compacts locally from now
    on (a summarization request whose answer replaces history), starting with the
    compaction under way. Emitted once per agent, between that compaction's
    ``model.compaction.started`` and its end."""

    after_model_call_index: int
    """The model call after which the compaction runs."""
    reason: Literal["no_compaction_item", "compaction_unsupported"]
    """``"no_compaction_item"``: the compaction request was answered as an ordinary
    request (output, but no ``compaction`` item); ``"compaction_unsupported"``: the
    server rejected it with an error naming ``compaction_trigger`` or saying compaction
    is not supported."""
    response_id: str | None
    """The declining response's id (None for a rejection without one)."""
    detail: str
    """What the server answered: the output item types it gave instead, or the error."""


class ModelAttemptStartedPayload(TypedDict):
    """One request is about to be sent: the warmup, or an attempt of a generation or
    compaction call (retries included)."""

    phase: ApiPhase
    """What the request is for."""
    model_call_index: int | None
    """The model call it belongs to, from 1 (None for the warmup)."""
    attempt: int
    """Which attempt it is, from 1."""
    max_attempts: int
    """How many attempts the call may take."""
    replay_mode: Literal["incremental", "full_history"]
    """``"incremental"``: it chains on ``previous_response_id``; ``"full_history"``: it
    replays the whole history."""
    previous_response_id: NotRequired[str]
    """The response it chains on (``incremental`` only)."""
    connection_generation: int
    """The connection it goes over (0 over HTTPS)."""


class _AttemptFailure(TypedDict):
    """What both attempt-failure payloads say about the failure."""

    phase: ApiPhase
    """What the request was for."""
    model_call_index: int
    """The model call it belongs to, from 1 (for a compaction: the call after which it runs)."""
    attempt: int
    """Which attempt failed, from 1."""
    max_attempts: int
    """How many attempts the call may take."""
    failure_phase: FailurePhase
    """Where it failed (``ResponsesError.failure_phase``)."""
    error_class: str
    """A stable snake_case name of the failure (``ResponsesError.error_class``, e.g.
    ``"premature_close"``)."""
    connection_generation: int
    """The connection it went over (0 over HTTPS)."""
    error: str
    """What went wrong."""


class ModelAttemptFailedPayload(_AttemptFailure):
    """An attempt failed; ``model.attempt.retrying`` follows when it is retried."""

    duration_ns: int
    """How long the attempt took."""
    retryable: bool
    """Whether this failure may be retried (if attempts remain)."""


class ModelAttemptRetryingPayload(_AttemptFailure):
    """A failed attempt will be retried after a backoff."""

    next_attempt: int
    """The attempt that follows."""
    delay_ns: int
    """The backoff before it."""
    server_requested_delay: bool
    """True when the server asked for the delay (a ``retry_after``)."""
    opens_new_socket: bool
    """True when the retry goes over a new connection."""
    replay_mode: Literal["full_history"]
    """Always ``"full_history"``: a retry replays the whole history."""


class _Connection(TypedDict):
    """What every connection event says (WebSocket only)."""

    transport: Literal["responses_websocket_v2"]
    """Always the WebSocket transport."""
    attempt: int
    """Which connection attempt of the agent it is, from 1."""
    purpose: ConnectionPurpose
    """Why it connects: the first connection, a reconnect, or the fallback after a
    failed warmup."""
    connection_generation: int
    """The connection's number, from 1."""


class ModelConnectionStartedPayload(_Connection):
    """The agent opens a WebSocket connection."""

    websocket_url: str
    """The URL, without its query."""


class ModelConnectionCompletedPayload(_Connection):
    """The WebSocket handshake succeeded."""

    duration_ns: int
    """How long connecting took."""
    http_status: int
    """The handshake's HTTP status (101)."""
    request_id: str | None
    """The server's ``x-request-id`` header, if it sent one."""
    server_model: str | None
    """The server's ``openai-model`` header, if it sent one."""
    server_reasoning_included: bool
    """Whether the server sent ``x-reasoning-included``."""


class ModelConnectionFailedPayload(_Connection):
    """Connecting failed (the attempt fails; it may be retried)."""

    duration_ns: int
    """How long connecting took before it failed."""
    error: str
    """What went wrong."""


class ApiEventPayload(TypedDict):
    """One raw message of the API traffic: every request body sent and every server
    frame received, unredacted (it holds prompts, outputs and encrypted reasoning).
    On by default; never emitted with ``AgentConfig(api_events=False)``."""

    direction: Literal["inbound", "outbound"]
    """``"outbound"``: a request the agent sent; ``"inbound"``: a frame the server sent."""
    transport: TransportName
    """The transport it went over."""
    phase: ApiPhase
    """What the request is for."""
    model_call_index: NotRequired[int]
    """The model call it belongs to, from 1 (absent for the warmup)."""
    event: JsonObject
    """The request body or server frame, verbatim."""


class ApiWarningPayload(TypedDict):
    """A server sent something wrong that the agent handled: a frame of a response
    other than the one being read, which is ignored (``foreign_response_frame``), or a
    tool call item without a usable ``call_id`` or repeating one of the same response,
    which is not kept and never runs (``discarded_tool_call``), or an MCP server's
    ``tools/list`` entry that was left out (``mcp_tool_skipped``), a tool of a server
    given another name than its plain one because that collides or is too long
    (``mcp_tool_renamed``), or the first thing a server sent that the MCP client could
    not use, such as a line of a stdio server's stdout that is not JSON-RPC, kept in
    that server's log instead of the host's stderr (``mcp_server_output``); or the user's login
    shell did not report its environment, so commands run in a login shell each, its
    start-up output included (``shell_login_environment``); or the
    server has no WebSocket endpoint and the agent goes on over HTTPS
    (``transport_fallback``); or a server refused optional request fields by name and
    later requests leave them out (``request_fields_dropped``)."""

    code: str
    """What was wrong, a stable snake_case name (``"foreign_response_frame"``, ``"discarded_tool_call"``,
    ``"mcp_tool_skipped"``, ``"mcp_tool_renamed"``, ``"mcp_server_output"``, ``"shell_login_environment"``,
    ``"transport_fallback"``,
    ``"request_fields_dropped"``)."""
    message: str
    """What happened, in words."""
    frame: NotRequired[str]
    """``foreign_response_frame``: the ignored frame's type."""
    response_id: NotRequired[str]
    """``foreign_response_frame``: the response that frame named."""
    live_response_id: NotRequired[str | None]
    """``foreign_response_frame``: the response being read, if its id was known."""
    status: NotRequired[int]
    """``transport_fallback``: the HTTP status that answered the WebSocket handshake."""
    fields: NotRequired[list[str]]
    """``request_fields_dropped``: the body fields left out from now on."""
    server: NotRequired[str]
    """``mcp_tool_skipped``, ``mcp_tool_renamed``, ``mcp_server_output``: the MCP server's name."""
    name: NotRequired[str]
    """``mcp_tool_renamed``: the name the tool is called by (``mcp__<server>__...``)."""
