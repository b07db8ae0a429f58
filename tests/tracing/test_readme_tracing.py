"""The README's tracing example, executed from README.md against the fake server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> dict[str, Any]:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"## Tracing\n\n.*?```python\n(.*?)```", text, re.S)
    assert match is not None, "README.md lost its tracing example"
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(match.group(1), str(README), "exec"), namespace)
    return namespace


async def test_the_readme_tracing_example_puts_the_turn_under_the_request_span(
    server: FakeResponsesServer, workspace: Path
) -> None:
    example = _example()
    exporter = InMemorySpanExporter()
    example["provider"].add_span_processor(SimpleSpanProcessor(exporter))

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "three files")

    config = make_config(server, workspace, tracing=ta.Tracing(tracer_provider=example["provider"]))
    async with scripted(script):
        async with ta.open_agent(config) as agent:
            assert await example["handle"](agent, "list the files") == "three files"
    spans = {span.name: span for span in exporter.get_finished_spans()}
    request, turn = spans["handle request"], spans["invoke_agent /root"]
    assert turn.parent is not None and turn.parent.span_id == request.context.span_id
    assert spans["chat gpt-5.5"].parent.span_id == turn.context.span_id  # type: ignore[union-attr]
