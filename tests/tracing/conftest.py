"""Tracing test kit: an SDK tracer provider with an in-memory exporter, a metric reader,
and helpers to look at the finished span tree."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trio_agent as ta

Tree = list[tuple[str, "Tree"]]


class Traces:
    """The providers a test traces with, and what they recorded."""

    def __init__(self, *, detailed: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.tracing = ta.Tracing(
            tracer_provider=self.provider, meter_provider=self.meters, detailed_attributes=detailed
        )

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        """Finished spans called ``name``, in start order."""
        return sorted((s for s in self.spans if s.name == name), key=lambda s: s.start_time or 0)

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def children(self, span: ReadableSpan, name: str | None = None) -> list[ReadableSpan]:
        """The finished children of ``span`` (called ``name``), in start order."""
        kids = [s for s in self.spans if s.parent is not None and s.parent.span_id == span.context.span_id]
        return sorted((s for s in kids if name is None or s.name == name), key=lambda s: s.start_time or 0)

    def tree(self, spans: Iterable[ReadableSpan] | None = None) -> Tree:
        """Names as a nested tree (children by start time, then end time, then name);
        roots are the spans whose parent is not among them."""
        spans = list(self.spans if spans is None else spans)
        ids = {s.context.span_id for s in spans}
        children: dict[int | None, list[ReadableSpan]] = defaultdict(list)
        for span in spans:
            parent = span.parent.span_id if span.parent is not None else None
            children[parent if parent in ids else None].append(span)

        def build(parent: int | None) -> Tree:
            kids = sorted(children[parent], key=lambda s: (s.start_time or 0, s.end_time or 0, s.name))
            return [(s.name, build(s.context.span_id)) for s in kids]

        return build(None)

    def histogram_points(self, name: str = "gen_ai.client.operation.time_to_first_chunk") -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        points: list[HistogramDataPoint] = []
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(p for p in metric.data.data_points if isinstance(p, HistogramDataPoint))
        return points


@pytest.fixture
def traces() -> Traces:
    return Traces()


@pytest.fixture
def detailed_traces() -> Traces:
    """``Traces`` with ``Tracing(detailed_attributes=True)``."""
    return Traces(detailed=True)


def parent_of(span: ReadableSpan, spans: Iterable[ReadableSpan]) -> ReadableSpan | None:
    assert span.parent is not None
    return next((s for s in spans if s.context.span_id == span.parent.span_id), None)


def seconds(span: ReadableSpan) -> float:
    assert span.start_time is not None and span.end_time is not None
    return round((span.end_time - span.start_time) / 1e9, 6)


def attrs_of(span: ReadableSpan, *keys: str) -> dict[str, Any]:
    attributes = dict(span.attributes or {})
    return {key: attributes.get(key) for key in keys}
