"""The trace context across a process boundary: W3C ``traceparent`` (and ``tracestate``).

``trio_agent.ray`` puts the context current where a task was started (the driver's
span) into the task's payload (``current_context``), and its actor makes it current
while the task's agent runs there (``continued``): the agent span on the actor is a
child of the driver's span, in the same trace. The W3C Trace Context propagator is
OpenTelemetry's API (no SDK needed), used directly rather than the global propagator,
so the format on the wire does not depend on what the application configured.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["continued", "current_context"]

_W3C = TraceContextTextMapPropagator()


def current_context() -> dict[str, str]:
    """The span current in this task as W3C headers (empty when there is none)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier


@contextmanager
def continued(carrier: dict[str, str]) -> Iterator[None]:
    """Make the span ``carrier`` names current in this task for the block."""
    token = otel_context.attach(_W3C.extract(carrier))
    try:
        yield
    finally:
        otel_context.detach(token)
