"""A tracer provider that crosses the process boundary: it pickles as the path of a
JSON Lines file, and every process that unpickles it (the driver, each actor) appends
its finished spans there -- so a test sees the driver's and the actors' spans in one
place, with their ids and parents."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

__all__ = ["FileTracerProvider", "read_spans"]


class _SpanFile(SpanExporter):
    def __init__(self, path: str) -> None:
        self._path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = []
        for span in spans:
            parent = span.parent
            lines.append(json.dumps({
                "name": span.name, "trace_id": span.context.trace_id, "span_id": span.context.span_id,
                "parent_id": parent.span_id if parent is not None else None,
                "remote_parent": parent.is_remote if parent is not None else None,
                "attributes": dict(span.attributes or {}),
                "links": [link.context.span_id for link in span.links],
            }) + "\n")
        with open(self._path, "a", encoding="utf-8") as file:  # one write per span: lines never interleave
            for line in lines:
                file.write(line)
        return SpanExportResult.SUCCESS


class FileTracerProvider(TracerProvider):
    """Exports every finished span to ``path`` (see the module docstring)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.add_span_processor(SimpleSpanProcessor(_SpanFile(path)))

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (FileTracerProvider, (self.path,))


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
