"""Tracing is optional: off, it imports nothing and leaves the event path alone; on,
a broken provider never breaks the agent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

import trio_agent as ta
from trio_agent._events import EventSink
from trio_agent._runtime._observers import ObservedSink
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm
from .conftest import Traces

REPO = Path(__file__).resolve().parents[2]

RUN_AN_AGENT = """
import sys, tempfile, trio, trio_agent as ta
from trio_agent._local_model import serve_local_model

async def main():
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_local_model)
        config = ta.AgentConfig(auth="local", workspace=tempfile.mkdtemp(),
                                responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url))
        async with ta.open_agent(config) as agent:
            result = await (await agent.prompt("hello")).result()
            assert result.final_message, result
        nursery.cancel_scope.cancel()

loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
trio.run(main)
loaded += sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
print(",".join(loaded) or "none")
"""


def test_importing_and_running_an_agent_without_tracing_imports_no_opentelemetry() -> None:
    result = subprocess.run(
        [sys.executable, "-c", RUN_AN_AGENT], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none"


async def test_without_tracing_the_agent_keeps_the_plain_event_sink(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    async def script() -> None:
        for n in (1, 2):
            conn = await warm(server)
            await conn.next_request()
            await trio.sleep(0.1)
            await conn.send_final(f"resp-{n}")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as plain:
            # Nothing wraps emit (the per-event, per-frame path) and the agent has no observer.
            assert type(plain._sink) is EventSink
            assert len(plain._parts.observers) == 0
            await (await plain.prompt("untraced")).result()
        assert traces.spans == []
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as traced:
            assert type(traced._sink) is ObservedSink
            assert len(traced._parts.observers) == 1
            await (await traced.prompt("traced")).result()
    assert traces.tree() == [("agent /root", [
        ("warmup gpt-5.5", [("model.attempt", [("websocket.connect", [])])]),
        ("invoke_agent /root", [("chat gpt-5.5", [])]),  # answered at its first attempt: no attempt span
    ])]


def test_tracing_settings_are_checked() -> None:
    with pytest.raises(ta.ConfigError, match="tracer provider"):
        ta.Tracing(tracer_provider="console")  # type: ignore[arg-type]
    with pytest.raises(ta.ConfigError, match="meter provider"):
        ta.Tracing(meter_provider=object())  # type: ignore[arg-type]
    with pytest.raises(ta.ConfigError, match=r"tracing must be a ta\.Tracing"):
        ta.AgentConfig(auth="key", tracing=True)  # type: ignore[arg-type]
    assert ta.Tracing().tracer_provider is None  # None: the global providers


class _FailingTracer:
    """Starts ``allowed`` spans, then raises: a tracer bug, or a broken provider."""

    def __init__(self, inner: Tracer, allowed: int) -> None:
        self._inner = inner
        self._allowed = allowed

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        if self._allowed <= 0:
            raise RuntimeError("exporter on fire")
        self._allowed -= 1
        return self._inner.start_span(*args, **kwargs)


class _FailingProvider(TracerProvider):
    def __init__(self, allowed: int) -> None:
        super().__init__()
        self.allowed = allowed

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return _FailingTracer(super().get_tracer(*args, **kwargs), self.allowed)


@pytest.mark.parametrize("allowed", [0, 2], ids=["at-open", "mid-turn"])
async def test_a_failing_tracer_stops_tracing_with_a_warning_and_the_agent_goes_on(
    server: FakeResponsesServer, workspace: Path, allowed: int
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "still fine")

    tracing = ta.Tracing(tracer_provider=_FailingProvider(allowed))
    with pytest.warns(RuntimeWarning, match="trio_agent: tracing"):
        async with scripted(script):
            async with ta.open_agent(make_config(server, workspace, tracing=tracing)) as agent:
                assert (await (await agent.prompt("go")).result()).final_message == "still fine"
