"""Payloads of tool calls and of the built-in tools that report on their own
(``tool.*``, ``sleep.*``, ``plan.updated``, ``mcp.*``). Emitted by
``_runtime/_calls/_tool_runner.py``, ``_runtime/_calls/_tool_environment.py``, ``_runtime/_calls/_nested_calls.py``,
``_runtime/_turns/_runner.py``, ``_runtime/_calls/_sleep.py``, ``_runtime/_calls/_collaboration.py``,
``_tools/_mcp.py`` and ``_tools/_mcp_session.py``."""

from typing import Literal, NotRequired, TypedDict

from ._shared import JsonValue, ToolStatus

__all__ = [
    "McpLogPayload",
    "McpProgressPayload",
    "McpServerFailedPayload",
    "McpServerReadyPayload",
    "McpServerRestartingPayload",
    "PlanStep",
    "PlanUpdatedPayload",
    "SleepCompletedPayload",
    "SleepStartedPayload",
    "ToolBlockedPayload",
    "ToolCallPayload",
    "ToolProgressPayload",
    "ToolResultPayload",
]


class ToolCallPayload(TypedDict):
    """A tool call starts: one the model made, or a nested call from an ``exec`` cell
    (``tools.exec_command(...)`` and the like). Its ``tool.result`` follows."""

    call_id: str
    """The call's id; a nested call's is ``<exec call id>/code-<n>``."""
    tool: str
    """The tool's name, without its namespace (``clock.sleep`` is ``sleep``)."""
    arguments: JsonValue
    """The call's input: the raw text of a custom tool call (``exec``'s JavaScript), the
    decoded arguments of a function call (their text when they are not valid JSON), the
    value a nested call passed."""
    model_call_index: int | None
    """The model call that made it, from 1; for a nested call, the one that made its
    ``exec`` (None when that cell is no longer known)."""
    mcp_server: NotRequired[str]
    """Nested calls of a listed MCP tool only: the name of its server."""
    mcp_tool: NotRequired[str]
    """Nested calls of a listed MCP tool only: the tool's own name on that server."""
    background: NotRequired[Literal[True]]
    """Present, True, on a nested call whose turn had already ended; such events carry
    no ``turn_id``."""


class ToolResultPayload(TypedDict):
    """A tool call ended: completed, failed (a failing tool is answered, the turn goes
    on) or cancelled with its turn. Every ``tool.call`` gets exactly one."""

    call_id: str
    """The id of its ``tool.call``."""
    tool: str
    """The tool's name, without its namespace."""
    status: ToolStatus
    """How the call ended."""
    duration_ns: int
    """How long the call ran (0 for a call nothing could answer)."""
    started_after_ns: NotRequired[int]
    """Nested calls only: when the call started, counted from the start of its cell."""
    result: str | list[JsonValue]
    """What the call returned: text, or content items (``input_text``/``input_image``
    objects); a nested call's list is passed through as the tool returned it."""
    background: NotRequired[Literal[True]]
    """Present, True, on a nested call whose turn had already ended."""


class ToolProgressPayload(TypedDict):
    """A running tool reported progress: a user tool's ``ctx.progress(message)``,
    ``collaboration.wait_agent`` starting to wait, or a nested ``exec_command`` /
    ``write_stdin`` call's command printing output while the call waits for it (one
    event per read, between the call's ``tool.call`` and ``tool.result``)."""

    call_id: str
    """The id of the running call."""
    tool: str
    """The tool's name."""
    message: str
    """The progress message; with ``stream``, the text the command printed (redacted as
    results are, at most one 64 KiB read; lines may span events; at most 1 MiB per call,
    then a note says how much was not streamed)."""
    stream: NotRequired[Literal["output"]]
    """Present on command output: ``message`` is output, not a status message."""
    background: NotRequired[Literal[True]]
    """Present, True, on output of a nested call whose turn had already ended."""


class ToolBlockedPayload(TypedDict):
    """A running ``async`` user tool held the event loop for longer than the threshold
    (``Tools.with_blocking_warning``, 100 ms unless set) in one step of its own task,
    between two of its awaits: a blocking call such as ``time.sleep`` or heavy computation, which stalls
    every other task of the process (other agents, streams, timeouts) meanwhile. At
    most one per call, emitted as soon as the step ends; the fix is to await, or to run
    the blocking part with ``trio.to_thread.run_sync`` (or make the tool a sync function,
    which runs in a worker thread). Under a virtual clock (``MockClock``) only an
    explicitly set threshold reports, so deterministic tests stay deterministic."""

    call_id: str
    """The id of the running call."""
    tool: str
    """The tool's name."""
    blocked_ms: float
    """How long the step held the loop, in milliseconds."""
    threshold_ms: float
    """The threshold it exceeded, in milliseconds."""


class SleepStartedPayload(TypedDict):
    """A ``clock.sleep`` call starts waiting."""

    id: str
    """The call's id."""
    duration_ms: int
    """How long it will sleep unless new input arrives."""


class SleepCompletedPayload(TypedDict):
    """A ``clock.sleep`` call ended: it slept its duration, or new input (a steer,
    mail, an injected item) woke it early."""

    id: str
    """The call's id."""
    duration_ms: int
    """The duration it asked for."""
    interrupted: bool
    """True when new input ended it early."""
    wall_time_ns: int
    """How long it slept."""


class PlanStep(TypedDict):
    """One step of an ``update_plan`` plan."""

    step: str
    """What to do, in a few words."""
    status: Literal["pending", "in_progress", "completed"]
    """Where the step stands."""


class PlanUpdatedPayload(TypedDict):
    """The model replaced its plan (a nested ``update_plan`` call)."""

    call_id: str
    """The id of the nested call."""
    explanation: str | None
    """Why the plan changed, when the model said."""
    plan: list[PlanStep]
    """Every step, in order."""
    background: NotRequired[Literal[True]]
    """Present, True, when the call's turn had already ended."""


class McpServerReadyPayload(TypedDict):
    """An MCP server started and listed its tools (servers start in the background;
    no ``turn_id``)."""

    server: str
    """The server's name."""
    tools: list[str]
    """The names it gave the model, ``mcp__<server>__<tool>``."""


class McpServerFailedPayload(TypedDict):
    """An MCP server could not start, or failed after it started (no ``turn_id``)."""

    server: str
    """The server's name."""
    error: str
    """What went wrong, with the end of the server's stderr when there is one."""


class McpServerRestartingPayload(TypedDict):
    """An MCP server that was up lost its connection -- a stdio server exited, a
    Streamable HTTP server dropped the session or stopped answering -- and the agent
    starts it again (reconnects) after ``delay_ns`` (no ``turn_id``). Restarts are
    bounded: past ``max_attempts`` in the restart window the server is failed
    (``mcp.server.failed``). Calls meanwhile wait for it, up to its startup timeout."""

    server: str
    """The server's name."""
    attempt: int
    """This restart's number in the current window, from 1."""
    max_attempts: int
    """How many restarts the window allows."""
    delay_ns: int
    """The backoff before this attempt (it doubles with each attempt of a window)."""
    reason: str
    """How the connection was lost, with the end of the server's stderr when there is one."""


class McpProgressPayload(TypedDict):
    """An MCP server reported progress on a running tool call (``notifications/progress``).
    Rate-bounded per call: bursts beyond a few events a second are dropped and counted
    in the next event's ``dropped``."""

    call_id: str
    """The nested call's id (``<exec call id>/code-<n>``)."""
    server: str
    """The server's name."""
    tool: str
    """The tool's own name on that server."""
    progress: float
    """How far along the call is (increasing; in the server's units)."""
    total: NotRequired[float]
    """The progress value at completion, when the server knows it."""
    message: NotRequired[str]
    """The server's text about it (at most 1,000 characters)."""
    dropped: NotRequired[int]
    """How many progress notifications of this call were dropped since the last event."""
    background: NotRequired[Literal[True]]
    """Present, True, when the call's turn had already ended."""


class McpLogPayload(TypedDict):
    """An MCP server sent a log message (``notifications/message``; no ``turn_id``).
    Rate-bounded per server: bursts beyond a few messages a second are dropped and
    counted in the next event's ``dropped``."""

    server: str
    """The server's name."""
    level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    """The message's syslog severity, as the server gave it."""
    data: JsonValue
    """What the server logged (any JSON; a string over 4,000 characters is cut)."""
    logger: NotRequired[str]
    """The name of the server's logger, when it gave one."""
    dropped: NotRequired[int]
    """How many log messages of this server were dropped since the last event."""
