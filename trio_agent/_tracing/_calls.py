"""Model calls and their attempts, recorded from events and emitted as spans at the end.

Theory of operation: a call's events arrive in an order that does not match its span
tree -- the first attempt's connection opens before ``model.call.started``, an
attempt's own start time is only known from its ``model.attempt.failed`` duration,
and the retry delay arrives after the failure. So a ``Call`` collects what happened
(Trio times and attributes) and ``emit`` builds the whole subtree in one go when the
call ends, each span with the explicit start and end times at which things happened:

    chat gpt-5.5            the call: start of the first try to the outcome
      model.attempt         one per attempt (error status on a failed one); none for a
                            call answered by a plain first attempt (``_plain``)
        websocket.connect   when the attempt opened a socket

A call that is still open when its turn ends (cancelled mid-stream or in backoff)
is emitted then, with an error status saying ``cancelled``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import _names as n

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

    from ._metrics import Series

__all__ = ["Attempt", "Call", "Connect", "Outcome", "emit", "fail"]

Clock = Callable[[float], int]


@attrs.define
class Outcome:
    """How a call (or its open attempt) ended: ``error`` None is success."""

    error_type: str | None = None
    message: str = ""


CANCELLED = Outcome("cancelled", "cancelled")


@attrs.define
class Connect:
    start: float
    attributes: n.Attributes
    end: float | None = None
    error: str | None = None


@attrs.define
class Attempt:
    start: float
    attributes: n.Attributes = attrs.field(factory=dict)
    connect: Connect | None = None
    sent: float | None = None  # when its request went out (``model.attempt.started``)
    end: float | None = None
    outcome: Outcome | None = None  # set once the attempt ended (failed, or the call succeeded)
    events: list[tuple[str, float, n.Attributes]] = attrs.field(factory=list)


@attrs.define
class Call:
    """One model call: ``operation`` is ``chat``, ``compact`` or ``warmup``."""

    operation: str
    start: float
    attributes: n.Attributes = attrs.field(factory=dict)
    attempts: list[Attempt] = attrs.field(factory=list)
    finish_reason: str | None = None  # the response's ``incomplete_details.reason``
    series: Series | None = None  # its metric series, once known (``ModelCalls._series``)
    usage: n.Attributes | None = None  # the answer's usage attributes, recorded when emitted
    first_chunk: tuple[float, str] | None = None  # time to first chunk (s) and warmup path, likewise

    def open_attempt(self) -> Attempt | None:
        if self.attempts and self.attempts[-1].outcome is None:
            return self.attempts[-1]
        return None

    def attempt(self, time: float) -> Attempt:
        """The attempt under way, or a new one starting at ``time``."""
        current = self.open_attempt()
        if current is None:
            current = Attempt(time)
            self.attempts.append(current)
        return current


def fail(span: Span, error_type: str, message: str) -> None:
    """Error status with ``error.type``, and -- unless the work was only cancelled -- the
    conventions' ``exception`` event (what ``Span.record_exception`` writes: the tracer
    sees events, not the exception object, so ``exception.type`` is the error class)."""
    span.set_attribute(n.ERROR_TYPE, error_type)
    if error_type != "cancelled":
        span.add_event(n.EXCEPTION, {n.EXCEPTION_TYPE: error_type, n.EXCEPTION_MESSAGE: message})
    span.set_status(Status(StatusCode.ERROR, message))


def _status(span: Span, outcome: Outcome | None) -> None:
    if outcome is not None and outcome.error_type is not None:
        fail(span, outcome.error_type, outcome.message)


#: What an attempt says that its call does not (the rest -- phase, previous response,
#: usage, response id and status, time to first chunk -- the call has too).
_ATTEMPT_ONLY = (n.MAX_ATTEMPTS, n.REPLAY_MODE, n.CONNECTION_GENERATION)


def _plain(call: Call, outcome: Outcome) -> Attempt | None:
    """The call's one attempt, when it has nothing to say of its own: the call succeeded
    at its first attempt, which neither opened a socket nor carries an event (an
    interrupt). Its span would repeat the call's (same work, ~1/3 of a warm turn's
    spans); its own attributes go on the call span instead."""
    if outcome.error_type is not None or len(call.attempts) != 1:
        return None
    attempt = call.attempts[0]
    if attempt.connect is not None or attempt.events or (attempt.outcome is not None and
                                                         attempt.outcome.error_type is not None):
        return None
    return attempt


def emit(tracer: Tracer, call: Call, parent: Context, end: float, outcome: Outcome, clock: Clock, *,
         detailed: bool = True) -> None:
    """Build the call's spans (see the module docstring); attempts still open take
    ``end`` and ``outcome``. A call answered by a plain first attempt (``_plain``) has
    no attempt span; its attempt's own attributes go on the call's only when
    ``detailed`` (``Tracing.detailed_attributes``)."""
    model = call.attributes.get(n.REQUEST_MODEL, "")
    attributes = call.attributes
    plain = _plain(call, outcome)
    if plain is not None and detailed:
        for key in _ATTEMPT_ONLY:
            if key in plain.attributes:
                attributes[key] = plain.attributes[key]
    span = tracer.start_span(
        f"{call.operation} {model}".strip(), context=parent, kind=SpanKind.CLIENT,
        attributes=attributes, start_time=clock(call.start),
    )
    if plain is None:
        inside = trace.set_span_in_context(span)
        for attempt in call.attempts:
            _emit_attempt(tracer, attempt, inside, end, outcome, clock)
    _status(span, outcome)
    span.end(end_time=clock(end))


def _emit_attempt(tracer: Tracer, attempt: Attempt, parent: Context, end: float, outcome: Outcome,
                  clock: Clock) -> None:
    span = tracer.start_span(
        "model.attempt", context=parent, kind=SpanKind.INTERNAL, attributes=attempt.attributes,
        start_time=clock(attempt.start),
    )
    finished = attempt.end if attempt.end is not None else end
    connect = attempt.connect
    if connect is not None:
        child = tracer.start_span(
            "websocket.connect", context=trace.set_span_in_context(span), kind=SpanKind.CLIENT,
            attributes=connect.attributes, start_time=clock(connect.start),
        )
        if connect.error is not None:
            _status(child, Outcome("connection_failed", connect.error))
        elif connect.end is None:
            _status(child, outcome)  # still connecting when the call ended
        child.end(end_time=clock(connect.end if connect.end is not None else finished))
    for name, time, attributes in attempt.events:
        span.add_event(name, attributes, timestamp=clock(time))
    _status(span, attempt.outcome if attempt.outcome is not None else outcome)
    span.end(end_time=clock(finished))
