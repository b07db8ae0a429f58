"""Add-ons on the pool (issue 26, item 2): a traced agent's spans hang under the span
that was current on the driver when its task was started (the trace context travels
with the task), and a recorded agent's cassette lands where the config asked and
replays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.ray import AgentTask, RayPool, TaskResult, TaskStatus, open_ray_pool
from trio_agent.testing import FakeResponsesServer, replay

from ._spans import FileTracerProvider, read_spans
from .test_pool import config

pytestmark = pytest.mark.usefixtures("ray_cluster")


async def test_a_traced_agent_on_the_pool_exports_spans_under_the_drivers_span(
    model: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "spans.jsonl"
    provider = FileTracerProvider(str(path))
    tracing = ta.Tracing(tracer_provider=provider)
    task = AgentTask(config(model, workspace, tracing=tracing), prompts=["hello traced"])
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=1, agents_per_actor=4) as pool:
            with provider.get_tracer("test").start_as_current_span("driver request") as request:
                result = await pool.run(task)
    assert result.status is TaskStatus.COMPLETED, result.error
    assert result.final_message == "echo: hello traced"
    context = request.get_span_context()
    spans = read_spans(path)
    by_name = {span["name"]: span for span in spans}
    agent = by_name["agent /root"]
    assert (agent["trace_id"], agent["parent_id"]) == (context.trace_id, context.span_id)
    assert agent["remote_parent"] is True  # its parent lives in another process: the driver
    turn = by_name["invoke_agent /root"]
    assert (turn["trace_id"], turn["parent_id"]) == (context.trace_id, agent["span_id"])
    assert {span["trace_id"] for span in spans} == {context.trace_id}
    assert "chat gpt-5.5" in by_name


async def test_each_remote_task_hangs_under_the_driver_span_current_at_its_start(
    model: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    """Tasks started concurrently under different driver spans land each in its own
    driver span's trace, with distinct agent ids; the settings added in issue 29
    (turn traces, content capture) travel with the task."""
    path = tmp_path / "spans.jsonl"
    provider = FileTracerProvider(str(path))
    tracing = ta.Tracing(tracer_provider=provider, capture_content=True, turn_traces=True)
    tracer = provider.get_tracer("test")
    requests: dict[str, Any] = {}
    results: dict[str, TaskResult] = {}

    async def ask(pool: RayPool, name: str) -> None:
        task = AgentTask(config(model, workspace, tracing=tracing, session_id=f"session-{name}"), prompts=[name])
        with tracer.start_as_current_span(f"driver {name}") as span:
            requests[name] = span.get_span_context()
            results[name] = await pool.run(task)

    with trio.fail_after(120):
        async with open_ray_pool(num_actors=1, agents_per_actor=4) as pool, trio.open_nursery() as nursery:
            for name in ("first", "second"):
                nursery.start_soon(ask, pool, name)
    assert {name: r.status for name, r in results.items()} == dict.fromkeys(requests, TaskStatus.COMPLETED)
    spans = read_spans(path)
    for name, context in requests.items():
        (agent,) = [s for s in spans if s["name"] == "agent /root"
                    and s["attributes"]["gen_ai.agent.id"] == f"session-{name}"]
        assert (agent["trace_id"], agent["parent_id"], agent["remote_parent"]) == (
            context.trace_id, context.span_id, True)
        # turn_traces: the turn roots its own trace, linked to its agent span.
        (turn,) = [s for s in spans if s["name"] == "invoke_agent /root"
                   and s["attributes"]["gen_ai.agent.id"] == f"session-{name}"]
        assert turn["parent_id"] is None and turn["links"] == [agent["span_id"]]
        (call,) = [s for s in spans if s["name"] == "chat gpt-5.5" and s["trace_id"] == turn["trace_id"]]
        assert name in call["attributes"]["gen_ai.input.messages"]  # capture_content crossed too


async def test_a_recorded_agent_on_the_pool_writes_its_cassette_where_asked_and_it_replays(
    model: FakeResponsesServer, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A path relative to the driver's working directory: the actor, whose working
    # directory is its own, writes it there all the same.
    cassette = tmp_path / "recorded" / "session.cassette.jsonl"
    cassette.parent.mkdir()
    monkeypatch.chdir(cassette.parent)
    task = AgentTask(config(model, workspace, record="session.cassette.jsonl"), prompts=["hello recorded"])
    with trio.fail_after(120):
        async with open_ray_pool(num_actors=1, agents_per_actor=4) as pool:
            result = await pool.run(task)
    assert result.status is TaskStatus.COMPLETED, result.error
    assert cassette.is_file()
    with trio.fail_after(60):
        replayed = await replay(cassette, workspace=workspace)
    replayed.check()
    assert [(turn.status, turn.final_message) for turn in replayed.turns] == [("completed", "echo: hello recorded")]
