"""``AgentTracer``: one agent's events as OpenTelemetry spans (the theory of operation).

Span tree (``docs/tracing.md`` has every attribute)::

    agent /root                      the agent's lifetime (open_agent .. close)
      warmup gpt-5.5                 the startup warmup request
      invoke_agent /root             one turn (events: steer, interrupt)
        chat gpt-5.5                 one model call -> model.attempt -> websocket.connect
                                     (no attempt span under a plain first attempt: ``_calls``)
        execute_tool exec            one tool call
          execute_tool exec_command  a call the exec cell made (tools.exec_command)
        compact gpt-5.5              a compaction request

Parents follow where the work was asked for, through Trio's contextvars: the agent
span is a child of the span current where the agent was opened (``open_agent``,
``fork``, ``spawn``); a turn is a child of the span current where its prompt was
accepted (``prompt``, ``submit``, ``start_if_idle``, triggering mail), or of the agent
span when that is the span the agent was opened under (or none) -- then the turn
links to the agent span. A fork's or child's agent span links to its parent agent's
span and to the parent's turn that was running. While a tool call runs, its span is
the current span of the task running it (``_contexts``); so is a turn's span in its
runner task, from when it starts: a turn's span starts when something first needs it
(``_live``: a tool call, a connection, a steer or interrupt, a child agent's link, a
turn accepted in the runner task, the deferred batch that ends it; over HTTPS, with
the turn, for an instrumented HTTP client), with the turn's own start time, parent,
links and attributes -- so a plain text turn makes no SDK call on its path.

Times are the events' Trio times (``_clock``). The tracer is an ``AgentObserver`` of
the observer seam, fed synchronously by the agent's ``ObservedSink`` (at once: it asks
for no deferral, so spans open in the emitting task's context), and never awaits. What
an ending asks of the SDK (a turn's end attributes and ``end``, a tool span's end, a
model call's spans and metric recordings) is queued with its times and contexts and
run later in one batch (``_deferred``: when the process idles, at a bound, or when the
agent closes -- before its agent span ends; ``Agent.flush_telemetry`` runs it at once).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

import attrs
import trio
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, SpanKind

from .. import __version__
from .._config import AgentConfig, Transport
from .._events import AgentEvent, EventKind
from .._runtime._observers import AgentObserver
from . import _names as n
from ._calls import CANCELLED, Outcome, fail
from ._clock import clock
from ._content import Content
from ._contexts import TaskContexts
from ._deferred import Deferred
from ._metrics import GenAIMetrics
from ._model_spans import ModelCalls

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanContext

    from .._runtime._observers import AgentSite
    from .._runtime._turns._turn import Prompt
    from . import TracingTree

__all__ = ["AgentTracer"]

_TERMINAL_FRAMES = frozenset({"response.completed", "response.incomplete", "response.failed"})
_API_FRAMES = _TERMINAL_FRAMES | {"response.interrupt"}
_EXEC_SPANS_KEPT = 256  # exec calls whose cells may still make nested calls


def _base_attributes(config: AgentConfig) -> n.Attributes:
    """What every agent, turn and model-call span says about the model and endpoint."""
    https = config.responses.transport is Transport.HTTPS
    endpoint = config.api_base_url + "/responses" if https else config.websocket_url
    return {
        n.PROVIDER: n.PROVIDER_OPENAI, n.REQUEST_MODEL: config.model, n.CONVERSATION_ID: config.session_id,
        n.TRANSPORT: config.responses.transport.value, **n.server_attributes(endpoint),
    }


@attrs.define
class _Turn:
    """A turn's span, started lazily (``AgentTracer._live``): ``start`` starts it with the
    turn's own start time, parent, links and attributes."""

    start: Callable[[], Span]
    runner: trio.lowlevel.Task  # the task that emitted run.started: the span is current there
    span: Span | None = None
    context: Context | None = None  # the span's, built once: current in the runner, the parent of its calls
    attached: bool = False  # made current in the runner task
    error: str = ""  # the run.error message


@attrs.define
class _Tool:
    span: Span
    turn_id: int | None
    nested: bool


class AgentTracer(AgentObserver):
    name = "tracing"
    events = True
    immediate = True  # spans open in the emitting task's context, at its time
    api_events = True  # the outbound interrupts are read from api.event
    background = True  # the SDK work of endings runs in ``run`` (``_deferred``)

    def __init__(self, site: AgentSite, tree: TracingTree) -> None:
        config, path, parent_id, origin = site.config, site.path, site.parent_id, site.origin
        tracing = tree.tracing
        self._tree = tree
        self._turn_traces = tracing.turn_traces
        self._detailed = detailed = tracing.detailed_attributes
        self._clock = clock()
        self._session_id = config.session_id
        self._path = path
        self._tracer = trace.get_tracer(n.INSTRUMENTATION, __version__, tracer_provider=tracing.tracer_provider)
        https = config.responses.transport is Transport.HTTPS
        self._base = _base_attributes(config)
        session = config.session_id
        identity: n.Attributes = {n.AGENT_NAME: path, n.AGENT_ID: session, n.CONVERSATION_ID: session}
        self._opened_under = trace.get_current_span().get_span_context()
        attributes: n.Attributes = {**self._base, **identity, n.AGENT_PATH: path, n.AGENT_ORIGIN: origin}
        n.put(attributes, n.PARENT_SESSION, parent_id)
        self._span = self._tracer.start_span(
            f"agent {path}", kind=SpanKind.INTERNAL, attributes=attributes, links=self._parent_links(parent_id),
            start_time=self._clock(trio.current_time()),
        )
        self._context = trace.set_span_in_context(self._span)
        self._turns: dict[int, _Turn] = {}
        self._accepted: dict[int, Context] = {}
        self._tools: dict[str, _Tool] = {}
        self._exec_spans: collections.OrderedDict[str, Span] = collections.OrderedDict()
        self._contexts = TaskContexts()
        self._content = Content(site.secrets) if tracing.captures_content() else None
        self._deferred = Deferred(config.session_id)
        meter = metrics.get_meter(n.INSTRUMENTATION, __version__, meter_provider=tracing.meter_provider)
        self._eager = https  # a turn's span starts with the turn (``_live``)
        self._model = ModelCalls(
            self._tracer, GenAIMetrics(meter), self._clock, self._base, https=https,
            parent_of=self._parent_of, defer=self._deferred.add, content=self._content, detailed=detailed,
        )
        self._model_connection_started = self._model.handlers[EventKind.MODEL_CONNECTION_STARTED]
        self._handlers: dict[EventKind, Callable[[AgentEvent], None]] = {
            **self._model.handlers,
            EventKind.RUN_STARTED: self._run_started,
            EventKind.RUN_STEERED: self._steered,
            EventKind.RUN_ERROR: self._run_error,
            EventKind.RUN_COMPLETED: self._run_ended,
            EventKind.RUN_FAILED: self._run_ended,
            EventKind.TOOL_CALL: self._tool_call,
            EventKind.TOOL_RESULT: self._tool_result,
            EventKind.API_EVENT: self._api_event,
            EventKind.API_WARNING: self._api_warning,
            EventKind.MODEL_CONNECTION_STARTED: self._connection_started,
        }
        self.kinds = frozenset(self._handlers)  # the text deltas never reach on_event
        # Of the frames, only the response's end and an outbound interrupt -- unless the
        # request bodies are captured (content capture): then every frame.
        self.api_frames = None if self._content is not None else _API_FRAMES
        # The agent's path and transport are on the agent span; on turns and tools only
        # with detailed attributes (``Tracing.detailed_attributes``).
        if detailed:
            identity[n.AGENT_PATH] = path
        self._identity = identity
        turn_base = self._base if detailed else {k: v for k, v in self._base.items() if k != n.TRANSPORT}
        # Every turn span's attributes start as these (built once per agent, copied per turn).
        self._turn_base: n.Attributes = {**turn_base, **identity, n.OPERATION: "invoke_agent"}
        tree.agents[config.session_id] = self

    def _parent_links(self, parent_id: str | None) -> list[Link]:
        parent = self._tree.agents.get(parent_id) if parent_id is not None else None
        if parent is None:
            return []
        links = [Link(parent.span_context, {n.LINK_TYPE: "parent_agent"})]
        live = parent.live_turn()
        if live is not None:
            links.append(Link(live, {n.LINK_TYPE: "parent_turn"}))
        return links

    @property
    def span_context(self) -> SpanContext:
        return self._span.get_span_context()

    def live_turn(self) -> SpanContext | None:
        """The span of the turn running now (the latest one started), if any."""
        if not self._turns:
            return None
        span = self._turn_span(next(reversed(self._turns)))
        return span.get_span_context() if span is not None else None

    def _parent_of(self, turn_id: int | None) -> Callable[[], Context]:
        """What resolves to the parent context of turn ``turn_id``'s work (the agent's
        when it has no turn): resolved when a span is made, which starts the turn's."""
        turn = self._turns.get(turn_id) if turn_id is not None else None
        if turn is None or turn_id is None:
            return self._agent_context
        return partial(self._live, turn_id, turn)

    def _agent_context(self) -> Context:
        return self._context

    def _live(self, turn_id: int, turn: _Turn) -> Context:
        """The turn's span context, its span started now if it was not yet. A turn's span
        starts only when something needs it -- a tool call, a steer, a connection, a
        child agent, the deferred batch that ends it -- so a plain turn makes no SDK
        call on its path; started in the turn's runner task, it is made current there."""
        context = turn.context
        if context is None:
            turn.span = span = turn.start()
            turn.context = context = trace.set_span_in_context(span)
        if not turn.attached and trio.lowlevel.current_task() is turn.runner and turn_id in self._turns:
            turn.attached = True  # (started elsewhere -- the batch, a child -- it is made current on the next need)
            self._contexts.attach(("turn", turn_id), context)
        return context

    # -- the observer protocol ---------------------------------------------------------

    def on_event(self, event: AgentEvent) -> None:
        handler = self._handlers.get(event.kind)
        if handler is not None:
            handler(event)

    def accepted(self, turn_id: int, prompt: Prompt | None) -> None:
        """Runs in the task that accepted the turn: remember its current span."""
        if self._turns:  # accepted in a turn's runner task: its span is the current one there
            task = trio.lowlevel.current_task()
            for live_id, turn in list(self._turns.items()):
                if turn.runner is task:
                    self._live(live_id, turn)
        current = trace.get_current_span().get_span_context()
        if current.is_valid and current != self._opened_under:
            self._accepted[turn_id] = otel_context.get_current()

    async def run(self) -> None:
        await self._deferred.run()

    def flush(self) -> None:
        self._deferred.flush()

    def close(self) -> None:
        now = trio.current_time()
        try:
            self._model.close(now)
            for turn_id in list(self._turns):
                self._end_turn(turn_id, now, "cancelled")
            for call_id in list(self._tools):
                self._end_tool(call_id, now, "cancelled", background=False)
            self._contexts.detach_all()
        finally:
            try:
                self._deferred.flush()  # every ending queued, before the agent span ends
            finally:
                self._span.end(end_time=self._clock(now))
                self._tree.agents.pop(self._session_id, None)

    # -- turns -------------------------------------------------------------------------

    def _run_started(self, event: AgentEvent) -> None:
        turn_id = event.turn_id
        if turn_id is None:
            return
        parent = self._accepted.pop(turn_id, None)
        if parent is None and self._turn_traces:
            parent = otel_context.Context()  # nothing current: the turn is a trace's root
        links = [] if parent is None else [Link(self.span_context, {n.LINK_TYPE: "agent"})]
        attributes = self._turn_base.copy()
        attributes[n.TURN_ID] = turn_id
        if self._detailed:
            n.put(attributes, n.EFFORT, event.payload.get("effort"))
            n.put(attributes, "trio_agent.turn.instruction_bytes", event.payload.get("instruction_bytes"))
        start = partial(
            self._tracer.start_span, f"invoke_agent {self._path}",
            context=parent if parent is not None else self._context, kind=SpanKind.INTERNAL,
            attributes=attributes, links=links, start_time=self._clock(event.time),
        )
        turn = self._turns[turn_id] = _Turn(start, trio.lowlevel.current_task())
        if self._eager:  # over HTTPS an instrumented HTTP client in the runner task reads it
            self._live(turn_id, turn)

    def _turn_span(self, turn_id: int | None) -> Span | None:
        """The span of live turn ``turn_id`` (started now if it was not yet), if any."""
        turn = self._turns.get(turn_id) if turn_id is not None else None
        if turn is None or turn_id is None:
            return None
        self._live(turn_id, turn)
        return turn.span

    def _connection_started(self, event: AgentEvent) -> None:
        self._turn_span(event.turn_id)  # the application's dialer may run: the turn is current
        self._model_connection_started(event)

    def _steered(self, event: AgentEvent) -> None:
        span = self._turn_span(event.turn_id)
        if span is not None:
            attributes: n.Attributes = {}
            n.put(attributes, "trio_agent.steer.index", event.payload.get("steer_index"))
            n.put(attributes, "trio_agent.steer.bytes", event.payload.get("instruction_bytes"))
            span.add_event("trio_agent.steer", attributes, timestamp=self._clock(event.time))

    def _run_error(self, event: AgentEvent) -> None:
        turn = self._turns.get(event.turn_id) if event.turn_id is not None else None
        if turn is not None:
            turn.error = str(event.payload.get("message", ""))

    def _run_ended(self, event: AgentEvent) -> None:
        if event.turn_id is None or event.turn_id not in self._turns:
            return
        p = event.payload
        self._end_turn(event.turn_id, event.time, str(p.get("status", "")), p)

    def _end_attributes(self, p: Mapping[str, object]) -> n.Attributes:
        """A turn span's end attributes, from its terminal event's payload (built in the
        deferred batch). A zero counter and the last response id (its call's
        ``gen_ai.response.id``) only with detailed attributes."""
        detailed = self._detailed
        attributes = n.turn_usage_attributes(p.get("usage"))
        for name, key in n.TURN_COUNTER_KEYS:
            value = p.get(name)
            if isinstance(value, int) and (value or detailed):
                attributes[key] = value
        if detailed and isinstance(last := p.get("last_response_id"), str):
            attributes["trio_agent.turn.last_response_id"] = last
        return attributes

    def _end_turn(self, turn_id: int, end: float, status: str, payload: Mapping[str, object] | None = None) -> None:
        turn = self._turns[turn_id]
        failure = self._model.failures.pop(turn_id, "_OTHER")
        completed = status == "completed"
        outcome = CANCELLED if status == "cancelled" else None if completed else Outcome(failure, turn.error)
        if self._model.open(turn_id):  # a call still under way ends with its turn, whose span parents it
            self._model.turn_ended(turn_id, end, outcome or Outcome(failure, turn.error))
        if self._tools:
            for call_id, tool in list(self._tools.items()):
                if tool.turn_id == turn_id and not tool.nested:  # a call whose result never came (a bug path)
                    self._end_tool(call_id, end, "cancelled", background=False)
        del self._turns[turn_id]
        self._contexts.detach(("turn", turn_id))
        self._deferred.add(partial(self._emit_turn_end, turn_id, turn, end, status, outcome, payload))

    def _emit_turn_end(self, turn_id: int, turn: _Turn, end: float, status: str, outcome: Outcome | None,
                       payload: Mapping[str, object] | None) -> None:
        self._live(turn_id, turn)  # a plain turn's span starts only now, at its own start time
        span = turn.span
        assert span is not None
        # Set in one call with the status: the SDK locks the span per call.
        attributes = self._end_attributes(payload) if payload is not None else {}
        attributes[n.TURN_STATUS] = status
        span.set_attributes(attributes)
        if outcome is not None:
            fail(span, outcome.error_type or "_OTHER", outcome.message)
        span.end(end_time=self._clock(end))

    # -- tools -------------------------------------------------------------------------

    def _tool_call(self, event: AgentEvent) -> None:
        call_id = str(event.payload.get("call_id", ""))
        span = self._start_tool(event, call_id, event.time)
        self._contexts.attach(("tool", call_id), trace.set_span_in_context(span))

    def _start_tool(self, event: AgentEvent, call_id: str, start: float) -> Span:
        p = event.payload
        tool = str(p.get("tool", ""))
        exec_id, marker, _ = call_id.partition("/code-")
        exec_span = self._exec_spans.get(exec_id) if marker else None
        attributes: n.Attributes = {
            **self._identity, n.OPERATION: "execute_tool", n.TOOL_NAME: tool, n.TOOL_CALL_ID: call_id,
            n.TOOL_TYPE: "function",
        }
        n.put(attributes, n.TURN_ID, event.turn_id)
        n.put(attributes, n.CALL_INDEX, p.get("model_call_index"))
        if exec_span is not None:
            attributes[n.TOOL_PARENT_CALL] = exec_id
        if self._content is not None and "arguments" in p:
            attributes[n.TOOL_ARGUMENTS] = self._content.text(p["arguments"])
        parent = trace.set_span_in_context(exec_span) if exec_span is not None else self._parent_of(event.turn_id)()
        span = self._tracer.start_span(
            f"execute_tool {tool}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes,
            start_time=self._clock(start),
        )
        self._tools[call_id] = _Tool(span, event.turn_id, exec_span is not None)
        if tool == "exec" and exec_span is None:
            self._exec_spans[call_id] = span
            while len(self._exec_spans) > _EXEC_SPANS_KEPT:
                self._exec_spans.popitem(last=False)
        return span

    def _tool_result(self, event: AgentEvent) -> None:
        p = event.payload
        call_id = str(p.get("call_id", ""))
        if call_id not in self._tools:  # answered without running (a cancelled turn's unstarted call)
            self._start_tool(event, call_id, event.time - (n.seconds(p.get("duration_ns")) or 0.0))
        if self._content is not None and "result" in p:
            self._tools[call_id].span.set_attribute(n.TOOL_RESULT, self._content.text(p["result"]))
        self._end_tool(call_id, event.time, str(p.get("status", "")), background=p.get("background") is True)

    def _end_tool(self, call_id: str, end: float, status: str, *, background: bool) -> None:
        span = self._tools.pop(call_id).span
        self._contexts.detach(("tool", call_id))
        self._deferred.add(partial(self._emit_tool_end, span, end, status, background))

    def _emit_tool_end(self, span: Span, end: float, status: str, background: bool) -> None:
        span.set_attribute(n.TOOL_STATUS, status)
        if background:
            span.set_attribute(n.TOOL_BACKGROUND, True)
        if status in ("failed", "cancelled"):
            fail(span, "tool_failed" if status == "failed" else "cancelled", status)
        span.end(end_time=self._clock(end))

    # -- wire-level details ------------------------------------------------------------

    def _api_event(self, event: AgentEvent) -> None:
        # Given only ``_API_FRAMES`` unless content is captured (``api_frames``).
        payload = event.payload
        frame = payload.get("event")
        if not isinstance(frame, dict):
            return
        if payload.get("direction") != "outbound":
            if frame.get("type") in _TERMINAL_FRAMES:
                response = frame.get("response")
                if isinstance(response, dict):
                    self._model.frame(event, response)
            return
        if frame.get("type") != "response.interrupt":
            if self._content is not None:
                self._model.request(event, frame)
            return
        attributes: n.Attributes = {}
        n.put(attributes, n.RESPONSE_ID, frame.get("response_id"))
        span = self._turn_span(event.turn_id)
        if span is not None:
            span.add_event("trio_agent.interrupt", attributes, timestamp=self._clock(event.time))
        self._model.interrupt(event, attributes)

    def _api_warning(self, event: AgentEvent) -> None:
        span = self._turn_span(event.turn_id)
        if span is not None:
            attributes: n.Attributes = {}
            n.put(attributes, "trio_agent.warning.code", event.payload.get("code"))
            span.add_event("trio_agent.api_warning", attributes, timestamp=self._clock(event.time))
