"""Agent events: kinds, the frozen event value, the per-agent stream and JSONL.

Emission is synchronous and never blocks the agent: events go into an unbounded
memory channel (as the reference does), so a slow or absent consumer costs memory,
never latency. ``seq`` is consumed per agent in emission order, starting at 1. A
listener (``AgentEvents._listen``: the thread manager's relay) can take the stream's
place: it is called with each event in the emitting task, and must neither block nor raise.

Events wait in an ``_EventQueue`` (a deque and the tasks waiting for it: a memory channel's
costs, the exception per empty ``receive_nowait`` included, without its generality).
Receiving takes events that already wait without a scheduler round each (a memory
channel's ``receive`` is a schedule point even when it has a value): one frame often
emits two events (``api.event``, ``assistant.delta``), and a round per event left the
consumer further behind with every frame. It still raises ``Cancelled`` at once when
the consumer is cancelled, and yields for real at least every ``_BURST`` events, so a
consumer whose own handling emits events cannot starve the other tasks.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from ._errors import AgentError
from ._event_queue import _BURST, _EventQueue, _reschedule
from ._jsontext import dumps

if TYPE_CHECKING:
    from ._event_payloads._shared import JsonValue

__all__ = [
    "PROTOCOL_VERSION", "AgentEvent", "AgentEvents", "EventKind", "EventSubscription", "EventsOverflowed",
    "write_jsonl",
]

PROTOCOL_VERSION = 1
_LINE_BREAKS = (("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\u0085", "\\u0085"))


class EventKind(enum.StrEnum):
    """Every event kind; the value is the dotted wire name."""

    RUN_STARTED = "run.started"
    RUN_STEERED = "run.steered"
    RUN_ERROR = "run.error"
    RUN_COMPLETED = "run.completed"
    RUN_FAILED = "run.failed"
    ASSISTANT_DELTA = "assistant.delta"
    ASSISTANT_MESSAGE = "assistant.message"
    REASONING_SUMMARY_DELTA = "reasoning.summary.delta"
    TOOL_CALL = "tool.call"
    TOOL_RESULT = "tool.result"
    TOOL_PROGRESS = "tool.progress"
    TOOL_BLOCKED = "tool.blocked"  # a user tool held the event loop: ``call_id``, ``tool``, ``blocked_ms``
    MODEL_WARMUP_STARTED = "model.warmup.started"
    MODEL_WARMUP_COMPLETED = "model.warmup.completed"
    MODEL_WARMUP_FAILED = "model.warmup.failed"
    MODEL_CALL_STARTED = "model.call.started"
    MODEL_CALL_COMPLETED = "model.call.completed"
    MODEL_CALL_FAILED = "model.call.failed"
    MODEL_COMPACTION_STARTED = "model.compaction.started"
    MODEL_COMPACTION_COMPLETED = "model.compaction.completed"
    MODEL_COMPACTION_FAILED = "model.compaction.failed"
    MODEL_COMPACTION_FALLBACK = "model.compaction.fallback"
    MODEL_ATTEMPT_STARTED = "model.attempt.started"
    MODEL_ATTEMPT_FAILED = "model.attempt.failed"
    MODEL_ATTEMPT_RETRYING = "model.attempt.retrying"
    MODEL_CONNECTION_STARTED = "model.connection.started"
    MODEL_CONNECTION_COMPLETED = "model.connection.completed"
    MODEL_CONNECTION_FAILED = "model.connection.failed"
    SLEEP_STARTED = "sleep.started"
    SLEEP_COMPLETED = "sleep.completed"
    AGENT_ASLEEP = "agent.asleep"  # the idle agent sleeps (Agent.sleep): ``seconds``
    AGENT_WOKE = "agent.woke"  # its sleep ended: ``reason``, ``slept_ns``, the wake-up turn's ``turn_id``
    PLAN_UPDATED = "plan.updated"  # update_plan: ``call_id``, ``explanation``, ``plan``
    MCP_SERVER_READY = "mcp.server.ready"  # ``server``, ``tools`` (their mcp__ names)
    MCP_SERVER_FAILED = "mcp.server.failed"  # ``server``, ``error``
    MCP_SERVER_RESTARTING = "mcp.server.restarting"  # ``server``, ``attempt``, ``delay_ns``, ``reason``
    MCP_PROGRESS = "mcp.progress"  # a server's progress on a call: ``server``, ``tool``, ``call_id``, ``progress``
    MCP_LOG = "mcp.log"  # a server's log message: ``server``, ``level``, ``data``
    APPROVAL_REQUESTED = "approval.requested"  # a call waits for the approval hook: ``ApprovalRequest.to_json()``
    APPROVAL_RESOLVED = "approval.resolved"  # ``approval_id``, ``call_id``, ``decision``, ``source`` (``error``)
    SANDBOX_UNAVAILABLE = "sandbox.unavailable"  # the default sandbox fell back to danger-full-access: ``reason``
    API_EVENT = "api.event"
    API_WARNING = "api.warning"  # server data that was wrong but handled: ``code``, ``message``, details

    @property
    def is_terminal(self) -> bool:
        return self is _RUN_COMPLETED or self is _RUN_FAILED  # (globals: ``EventKind.X`` is a descriptor call)

    def __str__(self) -> str:
        return self.value


_RUN_COMPLETED, _RUN_FAILED = EventKind.RUN_COMPLETED, EventKind.RUN_FAILED


@attrs.frozen
class AgentEvent:
    """One event. ``payload`` is a JSON-able dict; ``time`` is Trio's clock at emission."""

    kind: EventKind
    payload: dict[str, JsonValue]
    seq: int
    session_id: str
    turn_id: int | None = None
    time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The nanocodex JSONL envelope (plus ``turn_id`` when the event belongs to a turn)."""
        line: dict[str, Any] = {
            "protocol_version": PROTOCOL_VERSION,
            "request_id": self.session_id,
            "seq": self.seq,
            "type": self.kind.value,
            "payload": self.payload,
        }
        if self.turn_id is not None:
            line["turn_id"] = self.turn_id
        return line

    def to_json_line(self) -> str:
        """One compact JSON object and a newline. U+2028/U+2029/U+0085 are escaped so
        that no line-splitting reader (``str.splitlines``, JavaScript) sees two lines."""
        text = dumps(self.to_json())
        for char, escaped in _LINE_BREAKS:
            if char in text:
                text = text.replace(char, escaped)
        return text + "\n"


class EventSink:
    """The emitting side: stamps ``seq`` and sends without blocking.

    ``defer(emit_later)`` postpones work that only emits events -- the events announcing
    a request, built while the request could already be on its way -- until ``flush()``
    (right after the request is sent) or until anything else is emitted, whichever
    comes first: every ``emit`` runs what was deferred before it, so the stream's order
    is exactly as if the deferred work had run at once (only ``time`` is later)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._seq = 0
        self._queue: _EventQueue[AgentEvent] = _EventQueue()
        self._subscribers: list[EventSubscription] = []
        self._closed = False
        self._deferred: list[Callable[[], object]] = []
        self._now: Callable[[], float] = self._bind_clock
        self._listener: Callable[[AgentEvent], None] | None = None
        self.stream = AgentEvents(session_id, self._queue, self._subscribe, self._listen)

    def _bind_clock(self) -> float:
        # ``trio.current_time()`` is three calls deep; an agent's sink lives in one run,
        # so its clock is looked up once, at the first event.
        self._now = trio.lowlevel.current_clock().current_time
        return self._now()

    def defer(self, emit_later: Callable[[], object]) -> None:
        self._deferred.append(emit_later)

    def flush(self) -> None:
        """Run what was deferred, in order."""
        deferred = self._deferred
        if deferred:
            self._deferred = []  # their own emits must not run them again
            for emit_later in deferred:
                emit_later()

    def _subscribe(self, max_buffer: int) -> EventSubscription:
        subscription = EventSubscription(self.session_id, max_buffer, self._subscribers.remove)
        if self._closed:
            subscription._listening = False
            subscription._end()
        else:
            self._subscribers.append(subscription)
        return subscription

    def _listen(self, listener: Callable[[AgentEvent], None]) -> None:
        """From now on ``listener`` takes each event as it is emitted, in the emitting
        task, instead of ``stream``; the events already waiting go to it first."""
        queue = self._queue
        while queue._events:
            listener(queue._events.popleft())
        self._listener = listener

    def emit(
        self, kind: EventKind, payload: dict[str, Any], turn_id: int | None = None
    ) -> AgentEvent:
        if self._deferred:
            self.flush()
        self._seq += 1
        event = AgentEvent(kind, payload, self._seq, self.session_id, turn_id, self._now())
        # ``self._queue.put(event)``, inline (per event; this queue is unbounded): nothing
        # once nobody listens any more, the seq still consumed.
        queue = self._queue
        if self._listener is not None:
            if not queue.closed:
                self._listener(event)
        elif not (queue.closed or queue.discarded):
            queue._events.append(event)
            if queue._waiting:
                _reschedule(queue._waiting.popleft())
        if self._subscribers:
            for subscription in tuple(self._subscribers):
                subscription._offer(event)
        return event

    def close(self) -> None:
        self.flush()
        self._closed = True
        self._queue.close()
        for subscription in tuple(self._subscribers):
            subscription._end()


class AgentEvents:
    """``agent.events``: every event of one agent, in ``seq`` order; ends after close.

    Iterate it from one task (events are delivered once). ``request_id`` is the
    session id that every JSONL line carries.
    """

    def __init__(
        self, request_id: str, queue: _EventQueue[AgentEvent],
        subscribe: Callable[[int], EventSubscription] | None = None,
        listen: Callable[[Callable[[AgentEvent], None]], None] | None = None,
    ) -> None:
        self.request_id = request_id
        self._queue = queue
        self._subscribe = subscribe
        self._listen_hook = listen

    def _listen(self, listener: Callable[[AgentEvent], None]) -> None:
        """Hand the stream to ``listener``, a function called with each event in the
        emitting task (the thread manager's relay: no task and no queue between the
        agent and the manager's stream). The events that wait go to it at once; this
        stream then only ends, after close. ``listener`` must not block or raise."""
        if self._listen_hook is None:
            raise RuntimeError("this event stream has no emitter to listen to")
        self._listen_hook(listener)

    def subscribe(self, *, max_buffer: int = 4096) -> EventSubscription:
        """A second view of the stream: every event emitted from now on, in order, for
        another consumer (a UI beside ``write_jsonl``, a tracer, a test). Use it as
        ``async with agent.events.subscribe() as events: async for event in events``;
        it ends when the agent closes, and leaving the block unsubscribes.

        Each subscription buffers at most ``max_buffer`` events: a consumer that falls
        further behind is dropped (the emitter never waits for it); it still receives
        what was buffered, then ``EventsOverflowed``. ``agent.events`` itself is
        unaffected."""
        if self._subscribe is None:
            raise RuntimeError("this event stream has no emitter to subscribe to")
        if type(max_buffer) is not int or max_buffer < 1:
            raise ValueError(f"max_buffer must be a positive int, got {max_buffer!r}")
        return self._subscribe(max_buffer)

    async def receive(self) -> AgentEvent:
        """The next event; raises ``trio.EndOfChannel`` after the agent closed."""
        return await self._queue.get()

    def receive_nowait(self) -> AgentEvent:
        return self._queue.get_nowait()

    def __aiter__(self) -> AgentEvents:
        return self

    async def __anext__(self) -> AgentEvent:
        # A plain async iterator, not an async generator: a consumer cancelled mid-way
        # leaves nothing for the garbage collector to finalise. An event that waits is
        # taken here, as ``_EventQueue.get`` takes it (a cancel point, no schedule point,
        # at most ``_BURST`` in a row), without its coroutine: this is per event.
        queue = self._queue
        if queue._events and queue._count < _BURST:  # (discarding empties it)
            await trio.lowlevel.checkpoint_if_cancelled()
            queue._count += 1
            return queue._events.popleft()
        try:
            return await queue.get()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class EventsOverflowed(AgentError):
    """An ``agent.events.subscribe()`` consumer fell more than ``max_buffer`` events behind
    and was dropped; the events it missed went to every other consumer."""


class EventSubscription:
    """One subscriber's view of an agent's events (see ``AgentEvents.subscribe``)."""

    def __init__(self, request_id: str, max_buffer: int, unsubscribe: Callable[[EventSubscription], None]) -> None:
        self.request_id = request_id
        self._queue: _EventQueue[AgentEvent] = _EventQueue(max_buffer)
        self._unsubscribe = unsubscribe
        self._max_buffer = max_buffer
        self._overflowed = False
        self._listening = True

    def _offer(self, event: AgentEvent) -> None:
        try:
            delivered = self._queue.put(event)
        except trio.WouldBlock:
            self._overflowed = True
            self._stop()
            return
        if not delivered:
            self._stop()

    def _end(self) -> None:
        self._queue.close()

    def _stop(self) -> None:
        self._queue.close()
        if self._listening:
            self._listening = False
            self._unsubscribe(self)

    def close(self) -> None:
        """Unsubscribe now (idempotent); buffered events are discarded."""
        self._stop()
        self._queue.discard()

    async def __aenter__(self) -> EventSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def receive(self) -> AgentEvent:
        """The next event; ``trio.EndOfChannel`` after the agent closed, and
        ``EventsOverflowed`` (after the buffered events) if this consumer fell behind."""
        try:
            return await self._queue.get()
        except trio.EndOfChannel:
            if self._overflowed:
                raise EventsOverflowed(
                    f"this subscriber fell more than {self._max_buffer} events behind and was dropped; "
                    "consume faster or subscribe with a larger max_buffer"
                ) from None
            raise

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> AgentEvent:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class _AsyncWritable(Protocol):
    def write(self, data: str, /) -> Awaitable[object]: ...


class _Writable(Protocol):
    def write(self, data: str, /) -> object: ...


JsonlStream = trio.abc.SendStream | _AsyncWritable | _Writable


async def write_jsonl(events: AsyncIterable[AgentEvent], stream: JsonlStream) -> int:
    """Write every event as one compact JSON line until the stream ends; returns the count.

    ``stream`` may be a Trio stream (``send_all``), a Trio async file (async ``write``)
    or a plain text file-like object (sync ``write``; flushed after each line when it
    has ``flush``).
    """
    count = 0
    async for event in events:
        line = event.to_json_line()
        await _write(stream, line)
        count += 1
    return count


async def _write(stream: Any, line: str) -> None:  # duck-typed: see write_jsonl
    if hasattr(stream, "send_all"):
        await stream.send_all(line.encode())
        return
    result = stream.write(line)
    if hasattr(result, "__await__"):
        await result
        flush = getattr(stream, "flush", None)
        if flush is not None:
            await flush()
        return
    flush = getattr(stream, "flush", None)
    if flush is not None:
        flush()
    await trio.lowlevel.checkpoint()
