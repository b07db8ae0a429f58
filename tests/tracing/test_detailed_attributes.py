"""``Tracing(detailed_attributes=...)``: by default the turn and model-call spans leave
out what restates another span or a default; with it, they carry everything. The
conventions' attributes and the metrics are the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm
from .conftest import Traces

#: What a warm turn answered at its first attempt has on its spans by default.
TURN_KEYS = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.conversation.id",
    "gen_ai.agent.name",
    "gen_ai.agent.id",
    "server.address",
    "server.port",
    "trio_agent.turn.id",
    "trio_agent.turn.status",
    "trio_agent.turn.model_calls",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.reasoning.output_tokens",
}
CALL_KEYS = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.conversation.id",
    "server.address",
    "server.port",
    "gen_ai.request.stream",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.reasoning.output_tokens",
    "trio_agent.model_call.index",
    "trio_agent.reasoning.effort",
    "trio_agent.warmup.path",
}
#: What detailed attributes add to them.
TURN_DETAIL = {
    "trio_agent.agent.path": "/root",
    "trio_agent.transport": "responses_websocket_v2",
    "trio_agent.reasoning.effort": "low",
    "trio_agent.turn.instruction_bytes": len("hello"),
    "trio_agent.turn.tool_calls": 0,
    "trio_agent.turn.steers": 0,
    "trio_agent.turn.compactions": 0,
    "trio_agent.turn.response_retries": 0,
    "trio_agent.turn.last_response_id": "resp-1",
}
CALL_DETAIL = {
    "trio_agent.transport": "responses_websocket_v2",
    "trio_agent.phase": "generation",
    "trio_agent.previous_response_id": "resp-warmup",
    "trio_agent.response.status": "completed",
    "trio_agent.attempts": 1,
    "trio_agent.attempt.max": 5,
    "trio_agent.replay_mode": "incremental",
    "trio_agent.connection.generation": 1,
}


async def _one_turn(server: FakeResponsesServer, workspace: Path, traces: Traces) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tracing=traces.tracing)) as agent:
            await (await agent.prompt("hello")).result()


def _metric_points(traces: Traces) -> list[tuple[str, dict[str, object], int]]:
    data = traces.reader.get_metrics_data()
    assert data is not None
    return sorted(
        (
            (metric.name, dict(point.attributes or {}), getattr(point, "count", 0))
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            for point in metric.data.data_points
        ),
        key=repr,
    )


@pytest.mark.parametrize("detailed", [False, True])
async def test_a_warm_turns_spans_carry_the_detail_only_when_asked(
    server: FakeResponsesServer, workspace: Path, detailed: bool
) -> None:
    traces = Traces(detailed=detailed)
    await _one_turn(server, workspace, traces)

    turn = dict(traces.one("invoke_agent /root").attributes or {})
    call = dict(traces.one("chat gpt-5.5").attributes or {})
    assert (turn["trio_agent.turn.status"], turn["trio_agent.turn.model_calls"]) == ("completed", 1)
    assert call["gen_ai.response.id"] == "resp-1"
    if detailed:
        assert set(turn) == TURN_KEYS | set(TURN_DETAIL)
        assert {key: turn[key] for key in TURN_DETAIL} == TURN_DETAIL
        assert set(call) == CALL_KEYS | set(CALL_DETAIL)
        assert {key: call[key] for key in CALL_DETAIL} == CALL_DETAIL
    else:
        assert set(turn) == TURN_KEYS
        assert set(call) == CALL_KEYS
    # The agent span has the agent's path and transport either way.
    agent = dict(traces.one("agent /root").attributes or {})
    assert (agent["trio_agent.agent.path"], agent["trio_agent.transport"]) == ("/root", "responses_websocket_v2")


async def test_the_metrics_do_not_depend_on_detailed_attributes(server: FakeResponsesServer, workspace: Path) -> None:
    points = []
    for detailed in (False, True):
        traces = Traces(detailed=detailed)
        await _one_turn(server, workspace, traces)
        found = _metric_points(traces)
        for _name, attributes, _count in found:
            attributes.pop("server.port")  # each run's server has its own port
        points.append(found)
    lean, detailed_points = points
    assert lean == detailed_points
    assert {name for name, _, _ in lean} == {
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.time_to_first_chunk",
    }


def test_detailed_attributes_must_be_a_bool() -> None:
    with pytest.raises(ta.ConfigError, match="detailed_attributes"):
        ta.Tracing(detailed_attributes="yes")  # type: ignore[arg-type]
