"""The model events of one agent (``model.*``), turned into call and attempt spans.

Each turn has at most one model call under way (the runner samples, compacts and
runs tools one after another), and the startup warmup is the one call without a
turn, so open calls are kept by turn id (``None``: the warmup). What belongs to the
call under way arrives as ``model.connection.*``, ``model.attempt.*`` and the
response's terminal frame (``frame``: the model that
answered, why it stopped); ``model.call.completed``/``failed`` (``compaction.*``,
``warmup.*``) end it; emitting its spans (``_calls``) and recording its metrics
(``_metrics``) is queued (``defer``: ``_deferred``), with its parent's context (the
metrics' exemplars name that span: the turn's, current in the task that ran the call).

Time to first chunk is the conventions': from the answering attempt's request on the
wire to the first frame of its response stream (``time_to_first_event_ns``), whatever
the response holds -- text, reasoning or only a tool call. Connecting, backoff and the
wait for the warmup are not in it (the call span's duration has them).

Without ``Tracing(detailed_attributes=True)`` a call span leaves out what restates
something else: the transport (on the agent span), the phase (the operation name says
it), the previous response id, a ``completed`` status and the attempt count of a
first-attempt answer (and, then, its attempt's limit, replay mode and socket: ``_calls``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from .._events import AgentEvent, EventKind
from . import _names as n
from ._calls import CANCELLED, Call, Connect, Outcome, emit
from ._content import split_request
from ._paths import WarmupPaths

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer

    from ._content import Content
    from ._metrics import GenAIMetrics, Series

__all__ = ["ModelCalls"]

Handler = Callable[[AgentEvent], None]


class ModelCalls:
    def __init__(
        self, tracer: Tracer, gen_ai: GenAIMetrics, clock: Callable[[float], int], base: n.Attributes, *,
        https: bool, parent_of: Callable[[int | None], Callable[[], Context]],
        defer: Callable[[Callable[[], None]], None], content: Content | None = None, detailed: bool = True,
    ) -> None:
        self._tracer = tracer
        self._defer = defer
        self._metrics = gen_ai
        self._content = content  # None: content is not captured
        self._sent: n.Attributes = {}  # the instructions and tool definitions sent last
        self._clock = clock
        self._detailed = detailed
        self._transport = str(base.get(n.TRANSPORT, ""))
        # Every call's attributes start as these: provider, model, conversation, server
        # (and transport, when detailed).
        self._base = base if detailed else {k: v for k, v in base.items() if k != n.TRANSPORT}
        self._parent_of = parent_of
        self._paths = WarmupPaths(https=https)
        self._calls: dict[int | None, Call] = {}
        self.failures: dict[int, str] = {}  # turn id -> error.type of its failed model call
        self.handlers: dict[EventKind, Handler] = {
            EventKind.MODEL_WARMUP_STARTED: self._warmup_started,
            EventKind.MODEL_WARMUP_COMPLETED: self._warmup_completed,
            EventKind.MODEL_WARMUP_FAILED: self._warmup_failed,
            EventKind.MODEL_CALL_STARTED: self._call_started,
            EventKind.MODEL_CALL_COMPLETED: self._call_completed,
            EventKind.MODEL_CALL_FAILED: self._ended_failed,
            EventKind.MODEL_COMPACTION_STARTED: self._compaction_started,
            EventKind.MODEL_COMPACTION_COMPLETED: self._compaction_completed,
            EventKind.MODEL_COMPACTION_FAILED: self._ended_failed,
            EventKind.MODEL_CONNECTION_STARTED: self._connection_started,
            EventKind.MODEL_CONNECTION_COMPLETED: self._connection_completed,
            EventKind.MODEL_CONNECTION_FAILED: self._connection_failed,
            EventKind.MODEL_ATTEMPT_STARTED: self._attempt_started,
            EventKind.MODEL_ATTEMPT_FAILED: self._attempt_failed,
            EventKind.MODEL_ATTEMPT_RETRYING: self._retrying,
        }

    # -- opening calls ---------------------------------------------------------------

    def _open(self, turn_id: int | None, operation: str, time: float) -> Call:
        call = Call(operation, time, {**self._base, n.OPERATION: operation})
        self._calls[turn_id] = call
        return call

    def _call(self, event: AgentEvent) -> Call | None:
        """The call under way for this event's turn; a turn's call that announces itself
        late (its first attempt's connection comes before ``model.call.started``) is
        opened by its first event. A warmup is only ever opened by ``warmup.started``."""
        call = self._calls.get(event.turn_id)
        if call is None and event.turn_id is not None:
            call = self._open(event.turn_id, "chat", event.time)
            call.attributes[n.REQUEST_STREAM] = True
        return call

    def _warmup_started(self, event: AgentEvent) -> None:
        call = self._open(None, "warmup", event.time)
        if self._detailed:
            call.attributes[n.PHASE] = "warmup"

    def _compaction_started(self, event: AgentEvent) -> None:
        p = event.payload
        call = self._open(event.turn_id, "compact", event.time)
        n.put(call.attributes, n.CALL_INDEX, p.get("after_model_call_index"))
        n.put(call.attributes, "trio_agent.compaction.active_context_tokens", p.get("active_context_tokens"))
        n.put(call.attributes, "trio_agent.compaction.token_limit", p.get("auto_compact_token_limit"))
        if self._detailed:
            call.attributes[n.PHASE] = "compaction"
            n.put(call.attributes, n.PREVIOUS_RESPONSE_ID, p.get("previous_response_id"))

    def _call_started(self, event: AgentEvent) -> None:
        call = self._call(event)
        if call is None:
            return
        if self._detailed:
            call.attributes[n.PHASE] = "generation"
            n.put_fields(call.attributes, event.payload, _CALL_STARTED_DETAILED)
        else:
            n.put_fields(call.attributes, event.payload, _CALL_STARTED)

    # -- connections and attempts ----------------------------------------------------

    def _connection_started(self, event: AgentEvent) -> None:
        call = self._call(event)
        if call is None:
            return
        p = event.payload
        attempt = call.attempt(event.time)
        generation, purpose = p.get("connection_generation"), p.get("purpose")
        attributes: n.Attributes = {}
        n.put(attributes, n.CONNECTION_PURPOSE, purpose)
        n.put(attributes, n.CONNECTION_GENERATION, generation)
        n.put(attributes, "trio_agent.connection.attempt", p.get("attempt"))
        attempt.connect = Connect(event.time, attributes)
        attempt.attributes.update(attributes)
        if isinstance(generation, int) and isinstance(purpose, str):
            self._paths.connected(generation, purpose)

    def _connection_completed(self, event: AgentEvent) -> None:
        connect = self._connect(event)
        if connect is not None:
            connect.end = event.time
            n.put(connect.attributes, "trio_agent.connection.request_id", event.payload.get("request_id"))

    def _connection_failed(self, event: AgentEvent) -> None:
        connect = self._connect(event)
        if connect is not None:
            connect.end = event.time
            connect.error = str(event.payload.get("error", ""))

    def _connect(self, event: AgentEvent) -> Connect | None:
        call = self._calls.get(event.turn_id)
        attempt = call.open_attempt() if call is not None else None
        return attempt.connect if attempt is not None else None

    def _attempt_started(self, event: AgentEvent) -> None:
        call = self._call(event)
        if call is None:
            return
        p = event.payload
        attempt = call.attempt(event.time)
        attempt.sent = event.time
        n.put_fields(attempt.attributes, p, _ATTEMPT_STARTED)

    def _attempt_failed(self, event: AgentEvent) -> None:
        call = self._call(event)
        if call is None:
            return
        p = event.payload
        started = event.time - (n.seconds(p.get("duration_ns")) or 0.0)
        attempt = call.attempt(started)
        attempt.end = event.time
        error_class = p.get("error_class")
        attempt.outcome = Outcome(error_class if isinstance(error_class, str) else "_OTHER", str(p.get("error", "")))
        n.put_fields(attempt.attributes, p, _ATTEMPT_FAILED)

    def _retrying(self, event: AgentEvent) -> None:
        call = self._calls.get(event.turn_id)
        if call is None or not call.attempts:
            return
        p, attributes = event.payload, call.attempts[-1].attributes  # the attempt that just failed
        n.put(attributes, n.RETRY_DELAY, n.seconds(p.get("delay_ns")))
        n.put(attributes, n.RETRY_SERVER_DELAY, p.get("server_requested_delay"))
        n.put(attributes, n.RETRY_NEW_SOCKET, p.get("opens_new_socket"))

    def request(self, event: AgentEvent, body: dict[str, Any]) -> None:
        """A request body went out (content capture only): the call's input, its
        instructions and tool definitions, as of the latest attempt."""
        call = self._calls.get(event.turn_id)
        if call is None or self._content is None:
            return
        # A request chained on an earlier response (previous_response_id) leaves out
        # instructions and tools: the model still uses the ones sent last (the warmup's).
        items, definitions, instructions = split_request(body)
        if definitions is not None:
            self._sent[n.TOOL_DEFINITIONS] = self._content.text(definitions)
        if instructions is not None:
            self._sent[n.SYSTEM_INSTRUCTIONS] = self._content.text(instructions)
        call.attributes.update(self._sent)
        call.attributes[n.INPUT_MESSAGES] = self._content.text(items)

    def frame(self, event: AgentEvent, response: dict[str, Any]) -> None:
        """A terminal frame of the response under way (``response.completed``,
        ``.incomplete``, ``.failed``): the model that answered and why it stopped."""
        call = self._calls.get(event.turn_id)
        if call is None:
            return
        model = response.get("model")
        if isinstance(model, str):
            call.attributes[n.RESPONSE_MODEL] = model
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if isinstance(reason, str):
            call.finish_reason = reason
        if self._content is not None and "output" in response:
            call.attributes[n.OUTPUT_MESSAGES] = self._content.text(response["output"])

    def interrupt(self, event: AgentEvent, attributes: n.Attributes) -> None:
        """A ``response.interrupt`` went out on the attempt under way."""
        call = self._calls.get(event.turn_id)
        attempt = call.open_attempt() if call is not None else None
        if attempt is not None:
            attempt.events.append(("trio_agent.interrupt", event.time, attributes))

    # -- endings -----------------------------------------------------------------------

    def _answered(self, event: AgentEvent) -> Call | None:
        """The call of a completed response: its answering attempt ends now, successfully."""
        call = self._calls.get(event.turn_id)
        if call is not None:
            self._answer(call, event)
        return call

    def _answer(self, call: Call, event: AgentEvent) -> None:
        p = event.payload
        call.start = min(call.start, event.time - (n.seconds(p.get("duration_ns")) or 0.0))
        attempt = call.attempt(event.time)
        attempt.end, attempt.outcome = event.time, Outcome()
        usage = n.usage_attributes(p.get("usage"))
        result: n.Attributes = usage.copy()
        n.put(result, n.RESPONSE_ID, p.get("response_id"))
        n.put(result, n.RESPONSE_STATUS, p.get("status"))
        attempt.attributes.update(result)
        attempts = p.get("attempt")
        if not self._detailed:  # a ``completed`` status and a first-attempt answer go without saying
            if result.get(n.RESPONSE_STATUS) == "completed":
                del result[n.RESPONSE_STATUS]
            if attempts == 1:
                attempts = None
        call.attributes.update(result)
        n.put(call.attributes, n.ATTEMPTS, attempts)
        call.usage = usage

    def _series(self, call: Call) -> Series:
        """The call's metric series (its conventions' attributes), built once: the model
        that answered is known before the first recording (the terminal frame)."""
        if call.series is None:
            call.series = self._metrics.series(call.operation, call.attributes)
        return call.series

    def _call_completed(self, event: AgentEvent) -> None:
        """A model call answered: the warmup path is read now (``_paths`` follows the
        sockets in order); the attributes are built, and the spans emitted, in the
        deferred batch (``_completed``)."""
        turn_id = event.turn_id
        call = self._calls.pop(turn_id, None)
        if call is None:
            return
        generation = event.payload.get("connection_generation")
        path = self._paths.path_of(generation if isinstance(generation, int) else None)
        self._defer(partial(self._completed, call, event, path, self._parent_of(turn_id)))

    def _completed(self, call: Call, event: AgentEvent, path: str, parent: Callable[[], Context]) -> None:
        self._answer(call, event)
        p = event.payload
        call.attributes[n.WARMUP_PATH] = path
        reason = call.finish_reason or _finish_reason(p.get("status"), p.get("tool_calls"))
        if reason is not None:
            call.attributes[n.FINISH_REASONS] = (reason,)
        latency = n.seconds(p.get("time_to_first_event_ns"))
        if latency is not None:
            call.attributes[n.TIME_TO_FIRST_CHUNK] = latency
            call.attempts[-1].attributes[n.TIME_TO_FIRST_CHUNK] = latency
            call.first_chunk = (latency, path)
        self._emit(call, parent, event.time, Outcome())

    def _compaction_completed(self, event: AgentEvent) -> None:
        if self._answered(event) is not None:
            self._finish(event.turn_id, event.time, Outcome())

    def _warmup_completed(self, event: AgentEvent) -> None:
        p = event.payload
        call = self._calls.get(None)
        if call is None:
            return
        n.put(call.attributes, n.WARMUP_SOURCE, p.get("source"))
        if p.get("source") == "shared_prefix":
            self._paths.warmed(None, shared=True)  # another agent warmed it: no request of ours
            self._finish(None, event.time, Outcome())
            return
        generation = p.get("connection_generation")
        self._paths.warmed(generation if isinstance(generation, int) else None, shared=False)
        self._answered(event)
        self._finish(None, event.time, Outcome())

    def _warmup_failed(self, event: AgentEvent) -> None:
        call = self._calls.get(None)
        if call is None:
            return
        outcome = Outcome("warmup_failed", str(event.payload.get("error", "")))
        attempt = call.open_attempt()
        if attempt is not None:
            attempt.end, attempt.outcome = event.time, outcome
        self._finish(None, event.time, outcome)

    def _ended_failed(self, event: AgentEvent) -> None:
        """``model.call.failed`` / ``model.compaction.failed``: the error of the attempt
        that made it fail (``error.type`` is its ``error_class``)."""
        call = self._calls.get(event.turn_id)
        if call is None:
            return
        call.start = min(call.start, event.time - (n.seconds(event.payload.get("duration_ns")) or 0.0))
        last = call.attempts[-1].outcome if call.attempts else None
        message = str(event.payload.get("error", ""))
        error_type = last.error_type if last is not None and last.error_type is not None else "_OTHER"
        if event.turn_id is not None:
            self.failures[event.turn_id] = error_type
        if call.finish_reason is not None:  # an incomplete response the runner refused
            call.attributes[n.FINISH_REASONS] = (call.finish_reason,)
        self._finish(event.turn_id, event.time, Outcome(error_type, message))

    def _finish(self, turn_id: int | None, end: float, outcome: Outcome) -> None:
        call = self._calls.pop(turn_id)
        self._defer(partial(self._emit, call, self._parent_of(turn_id), end, outcome))

    def _emit(self, call: Call, parent: Callable[[], Context], end: float, outcome: Outcome) -> None:
        """The call's spans and metric recordings (deferred: ``_finish``); ``parent``
        resolves to its parent's context (starting a turn's span: ``AgentTracer._live``),
        whose span -- the turn's, current in its runner task -- an exemplar names."""
        context = parent()
        try:
            emit(self._tracer, call, context, end, outcome, self._clock, detailed=self._detailed)
        finally:  # an application's span processor raising on end: the recordings still happen
            if call.operation != "warmup":
                self._record(call, context, end, outcome)

    def _record(self, call: Call, current: Context, end: float, outcome: Outcome) -> None:
        series, gen_ai = self._series(call), self._metrics
        if call.usage is not None:
            gen_ai.usage(series, call.usage, current)
        if call.first_chunk is not None:
            latency, path = call.first_chunk
            gen_ai.first_chunk.record(latency, series.first_chunk(self._transport, path), context=current)
        gen_ai.operation(series, max(0.0, end - call.start), outcome.error_type, current)

    def open(self, turn_id: int) -> bool:
        """Whether turn ``turn_id`` has a call under way."""
        return turn_id in self._calls

    def turn_ended(self, turn_id: int, end: float, outcome: Outcome) -> None:
        """The turn ended with its call still under way (cancelled, or failed outside
        the model client): the call ends with the turn."""
        if turn_id in self._calls:
            self._finish(turn_id, end, outcome)

    def close(self, end: float) -> None:
        """The agent closed: what is still under way (a warmup cut short) was cancelled."""
        for turn_id in list(self._calls):
            self._finish(turn_id, end, CANCELLED)


_CALL_STARTED = ((n.CALL_INDEX, "call_index"), (n.EFFORT, "effort"))
_CALL_STARTED_DETAILED = (*_CALL_STARTED, (n.PREVIOUS_RESPONSE_ID, "previous_response_id"))
_ATTEMPT_STARTED = ((n.ATTEMPT, "attempt"), (n.MAX_ATTEMPTS, "max_attempts"), (n.PHASE, "phase"),
                    (n.REPLAY_MODE, "replay_mode"), (n.PREVIOUS_RESPONSE_ID, "previous_response_id"),
                    (n.CONNECTION_GENERATION, "connection_generation"))
_ATTEMPT_FAILED = ((n.ATTEMPT, "attempt"), (n.MAX_ATTEMPTS, "max_attempts"), (n.PHASE, "phase"),
                   (n.ERROR_CLASS, "error_class"), (n.FAILURE_PHASE, "failure_phase"),
                   (n.RETRYABLE, "retryable"), (n.CONNECTION_GENERATION, "connection_generation"))


def _finish_reason(status: object, tool_calls: object) -> str | None:
    """``gen_ai.response.finish_reasons`` of a completed response without
    ``incomplete_details``: the conventions' ``tool_calls`` / ``stop``, or its status
    (``interrupted``: cut short by the agent)."""
    if status == "completed":
        return "tool_calls" if isinstance(tool_calls, int) and tool_calls > 0 else "stop"
    return status if isinstance(status, str) else None
