"""The OpenTelemetry SDK's own floor per traced turn (``tracing_cost``'s last section).

Whatever trio_agent does, a traced turn asks the SDK for its spans, their attributes
and its metric recordings; each has a price the SDK sets: ``start_span`` builds the
span (sampler, ids, a ``BoundedAttributes`` that cleans every attribute value, the
processor's ``on_start``), ``end`` copies it into a ``ReadableSpan`` for the
``BatchSpanProcessor``'s queue, and every histogram recording copies and cleans its
attribute mapping, sorts and hashes it into the series key (the SDK keeps no cache by
mapping), aggregates and offers an exemplar when a sampled span is current. This
times each of them alone, in a hot loop (the most favourable case: in a turn the same
code runs cold, between the runtime's own work), and multiplies by what a traced
turn of ``tracing_cost`` counts. If that product alone exceeds what 0.95 of the
untraced turns/s leaves, no trio_agent code can meet it with those spans, attributes
and recordings while the SDK's work is on the turn's path; tracing now defers that
work to moments the process would otherwise wait (``trio_agent/_tracing/_deferred.py``),
so the floor is the CPU to hide there, and in a CPU-bound turn the idle time per turn
is the room there is.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs


@attrs.frozen
class Floor:
    """CPU microseconds per operation of the SDK alone (median of repeated hot loops)."""

    span: float  # start_span + end, no attributes, explicit times, BatchSpanProcessor
    attribute: float  # one more attribute given to start_span
    attribute_set: float  # one more attribute by set_attributes after start
    recording: float  # histogram record, 6 attributes, a sampled span current (exemplar)
    recording_bare: float  # histogram record, no attributes
    attach: float  # context.attach + detach

    def turn(self, spans: float, attributes: float, recordings: float) -> float:
        return spans * self.span + attributes * self.attribute + recordings * self.recording


def _time(work: Callable[[], object], loops: int = 2000, repeats: int = 7) -> float:
    """CPU microseconds per call (this thread's: a shared machine's preemption is not
    counted), the median of ``repeats`` loops."""
    runs = []
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(loops):
            work()
        runs.append((time.thread_time() - start) / loops * 1e6)
    return statistics.median(runs)


def measure_floor() -> Floor:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropping()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    tracer = tracer_provider.get_tracer("floor")
    histogram = meter_provider.get_meter("floor").create_histogram("floor", unit="s")
    # A turn span's kind of attributes: strings and integers, 24 of them.
    attributes: dict[str, Any] = {f"floor.attribute_{i}": f"value {i}" if i % 2 else i for i in range(24)}
    series: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                              "gen_ai.request.model": "gpt-5.5", "server.address": "127.0.0.1", "server.port": 443,
                              "gen_ai.token.type": "input"}
    parent = tracer.start_span("parent")
    context = trace.set_span_in_context(parent)
    now = time.time_ns()

    def span(given: dict[str, Any] | None, later: dict[str, Any] | None = None) -> Callable[[], None]:
        def work() -> None:
            child = tracer.start_span("chat", context=context, kind=SpanKind.CLIENT, attributes=given,
                                      start_time=now)
            if later is not None:
                child.set_attributes(later)
            child.end(end_time=now + 1000)
        return work

    def attach() -> None:
        otel_context.detach(otel_context.attach(context))

    bare = _time(span(None))
    given = _time(span(attributes))
    set_later = _time(span(None, attributes))
    token = otel_context.attach(context)  # a turn's span is current when tracing records
    try:
        recording = _time(lambda: histogram.record(0.5, series))
        recording_bare = _time(lambda: histogram.record(0.5))
    finally:
        otel_context.detach(token)
    floor = Floor(bare, (given - bare) / len(attributes), (set_later - bare) / len(attributes), recording,
                  recording_bare, _time(attach))
    parent.end()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    return floor
