"""Fault matrix: tracing's deferred SDK work (``_tracing/_deferred.py``), hostile.

The SDK work of a turn's end is queued and run when the process idles, at a bound, or
when the agent closes. Whatever the application's OpenTelemetry pipeline does -- a
processor or exporter that raises on a span's end, a provider that raises when a span
starts -- and whatever happens to the agent -- cancelled with telemetry still queued,
a process that never idles -- every span is exported once at most (exactly once for
every one the pipeline accepted), nothing is raised out of ``open_agent`` and the
agent closes.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import trio_agent as ta
from trio_agent._tracing import _deferred
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm
from ..tracing.conftest import Traces


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queued work waits for an idle moment however long the process stays busy (the
    tests of the never-idle cases count on nothing but the bound and the close)."""
    monkeypatch.setattr(_deferred, "MAX_DELAY", float("inf"))


async def _answers(server: FakeResponsesServer, count: int) -> None:
    conn = await warm(server)
    for n in range(count):
        await conn.next_request()
        await conn.send_final(f"resp-{n}")


def _ids(spans: list[ReadableSpan]) -> Counter[int]:
    return Counter(span.context.span_id for span in spans if span.context is not None)


class _Raising(SpanProcessor):
    """A processor that raises on the end of every span called ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.raised = 0

    def on_end(self, span: ReadableSpan) -> None:
        if span.name == self.name:
            self.raised += 1
            raise RuntimeError("processor broke")


class _RaisingExporter(SpanExporter):
    """An exporter that keeps every span it is given, then raises."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.spans.extend(spans)
        raise RuntimeError("exporter broke")


async def test_a_processor_raising_on_every_call_span_neither_loses_nor_repeats_a_span(
    server: FakeResponsesServer, workspace: Path
) -> None:
    traces = Traces()  # its recording processor comes first: it sees every span that ends
    broken = _Raising("chat gpt-5.5")
    traces.provider.add_span_processor(broken)
    with pytest.warns(RuntimeWarning, match="deferred span or metric recording failed"):
        async with scripted(lambda: _answers(server, 3)):
            async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
                for n in range(3):
                    assert (await (await agent.prompt(f"turn {n}")).result()).final_message
    assert broken.raised == 3
    assert set(_ids(traces.spans).values()) == {1}
    assert [s.name for s in traces.named("invoke_agent /root")] == ["invoke_agent /root"] * 3
    assert len(traces.named("chat gpt-5.5")) == 3
    assert len(traces.named("agent /root")) == 1  # tracing went on: the agent span ended at close
    assert {p.count for p in traces.histogram_points("gen_ai.client.operation.duration")} == {3}


async def test_an_exporter_that_raises_is_given_each_span_once(server: FakeResponsesServer, workspace: Path) -> None:
    exporter = _RaisingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # the SDK logs the exporter's error
    tracing = ta.Tracing(tracer_provider=provider)
    async with scripted(lambda: _answers(server, 2)):
        async with ta.open_agent(make_config(server, workspace, tracing=tracing)) as agent:
            for n in range(2):
                await (await agent.prompt(f"turn {n}")).result()
    assert set(_ids(exporter.spans).values()) == {1}
    names = Counter(s.name for s in exporter.spans)
    assert (names["agent /root"], names["warmup gpt-5.5"], names["invoke_agent /root"], names["chat gpt-5.5"]) == (
        1,
        1,
        2,
        2,
    )


class _FailingTurns(TracerProvider):
    """A provider whose tracers raise when a second turn span starts."""

    def __init__(self) -> None:
        super().__init__()
        self.turns = 0

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        tracer = super().get_tracer(*args, **kwargs)
        start = tracer.start_span

        def start_span(name: str, *a: Any, **kw: Any) -> Any:
            if name.startswith("invoke_agent"):
                self.turns += 1
                if self.turns == 2:
                    raise RuntimeError("provider broke")
            return start(name, *a, **kw)

        tracer.start_span = start_span  # type: ignore[method-assign]
        return tracer


async def test_a_provider_raising_at_a_turn_spans_start_loses_only_what_needed_it(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """A plain turn's span starts in the deferred batch (``AgentTracer._live``): the
    provider's error there is warned about, what needed that span is not made, and
    tracing goes on."""
    traces = Traces()
    provider = _FailingTurns()
    provider.add_span_processor(SimpleSpanProcessor(traces.exporter))
    tracing = ta.Tracing(tracer_provider=provider, meter_provider=traces.meters)
    with pytest.warns(RuntimeWarning, match="deferred span or metric recording failed"):
        async with scripted(lambda: _answers(server, 3)):
            async with ta.open_agent(make_config(server, workspace, tracing=tracing)) as agent:
                finals = [(await (await agent.prompt(f"turn {n}")).result()).final_message for n in range(3)]
    assert all(finals) and len(finals) == 3
    assert set(_ids(traces.spans).values()) == {1}
    turns, calls = traces.named("invoke_agent /root"), traces.named("chat gpt-5.5")
    # The second turn's span is tried again when its end runs (the provider then accepts
    # it); its call span, whose parent could not start, is the one span not made.
    assert [dict(t.attributes or {})["trio_agent.turn.id"] for t in turns] == [1, 2, 3]
    assert [c.parent.span_id if c.parent else None for c in calls] == [
        turns[0].context.span_id,
        turns[2].context.span_id,
    ]
    assert len(traces.named("agent /root")) == 1


async def _busy(done: trio.Event) -> None:
    """Keep a task runnable: the process never idles, so nothing is flushed at idle."""
    while not done.is_set():
        await trio.lowlevel.checkpoint()


async def test_an_agent_cancelled_with_telemetry_queued_emits_it_once_on_its_way_out(
    server: FakeResponsesServer, workspace: Path, patient: None
) -> None:
    traces, done = Traces(), trio.Event()
    async with scripted(lambda: _answers(server, 2)) as nursery:
        nursery.start_soon(_busy, done)
        with trio.CancelScope() as scope:
            async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
                for n in range(2):
                    await (await agent.prompt(f"turn {n}")).result()
                assert traces.named("invoke_agent /root") == []  # queued: the process never idled
                scope.cancel()
                await trio.sleep_forever()
        done.set()
    assert scope.cancelled_caught
    assert set(_ids(traces.spans).values()) == {1}
    assert len(traces.named("invoke_agent /root")) == 2
    assert len(traces.named("chat gpt-5.5")) == 2
    assert len(traces.named("agent /root")) == 1


async def test_a_process_that_never_idles_flushes_at_the_bound_in_the_emitting_task(
    server: FakeResponsesServer, workspace: Path, patient: None
) -> None:
    traces, done, turns = Traces(), trio.Event(), 80
    async with scripted(lambda: _answers(server, turns)) as nursery:
        nursery.start_soon(_busy, done)
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            for n in range(turns):
                await (await agent.prompt(f"turn {n}")).result()
            before_close = len(traces.named("invoke_agent /root"))
            assert 0 < before_close < turns  # the bound (64 plain turns), never an idle moment
        done.set()
    assert set(_ids(traces.spans).values()) == {1}
    assert len(traces.named("invoke_agent /root")) == turns
    assert len(traces.named("chat gpt-5.5")) == turns


@pytest.mark.parametrize("max_delay", [0.0, float("inf")])
async def test_a_process_that_never_idles_exports_after_the_delay_at_most(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch, max_delay: float
) -> None:
    # MAX_DELAY 0: the wait for an idle moment ends at once, so a busy process (a server
    # running other agents) exports while the agent stays open; inf, the control: it
    # waits for the close.
    monkeypatch.setattr(_deferred, "MAX_DELAY", max_delay)
    traces, done = Traces(), trio.Event()
    async with scripted(lambda: _answers(server, 1)) as nursery:
        nursery.start_soon(_busy, done)
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            await (await agent.prompt("turn 0")).result()
            for _ in range(200):  # scheduler rounds, never an idle moment (_busy)
                if traces.named("invoke_agent /root"):
                    break
                await trio.lowlevel.checkpoint()
            exported_while_open = len(traces.named("invoke_agent /root"))
        done.set()
    assert exported_while_open == (1 if max_delay == 0.0 else 0)
    assert len(traces.named("invoke_agent /root")) == 1
    assert set(_ids(traces.spans).values()) == {1}
