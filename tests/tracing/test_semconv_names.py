"""Every convention name the tracer writes -- span names, attribute keys, metric names,
operation and token-type values -- checked against the constants of the
``opentelemetry-semantic-conventions`` package, never against strings written here:
a name that drifts from the conventions (or a typo) fails, and so does a ``gen_ai.*``
key the conventions do not define. ``trio_agent.*`` keys are this library's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes, exception_attributes, server_attributes

import trio_agent as ta
from trio_agent._tracing import _names as n
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm
from .conftest import Traces


def _constants(*modules: Any) -> set[str]:
    return {value for module in modules for name, value in vars(module).items()
            if name.isupper() and isinstance(value, str)}


ATTRIBUTES = _constants(gen_ai, error_attributes, exception_attributes, server_attributes)
METRICS = _constants(gen_ai_metrics)
OPERATIONS = {value.value for value in gen_ai.GenAiOperationNameValues}
TOKEN_TYPES = {value.value for value in gen_ai.GenAiTokenTypeValues}
OWN_OPERATIONS = {"agent", "warmup", "compact"}  # trio_agent's spans beside the conventions'
OWN_SPANS = {"model.attempt", "websocket.connect"}


def test_the_names_module_spells_the_conventions_constants() -> None:
    pairs = {
        n.OPERATION: gen_ai.GEN_AI_OPERATION_NAME, n.PROVIDER: gen_ai.GEN_AI_PROVIDER_NAME,
        n.REQUEST_MODEL: gen_ai.GEN_AI_REQUEST_MODEL, n.REQUEST_STREAM: gen_ai.GEN_AI_REQUEST_STREAM,
        n.RESPONSE_ID: gen_ai.GEN_AI_RESPONSE_ID, n.RESPONSE_MODEL: gen_ai.GEN_AI_RESPONSE_MODEL,
        n.FINISH_REASONS: gen_ai.GEN_AI_RESPONSE_FINISH_REASONS,
        n.TIME_TO_FIRST_CHUNK: gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        n.CONVERSATION_ID: gen_ai.GEN_AI_CONVERSATION_ID, n.AGENT_NAME: gen_ai.GEN_AI_AGENT_NAME,
        n.AGENT_ID: gen_ai.GEN_AI_AGENT_ID, n.TOOL_NAME: gen_ai.GEN_AI_TOOL_NAME,
        n.TOOL_CALL_ID: gen_ai.GEN_AI_TOOL_CALL_ID, n.TOOL_TYPE: gen_ai.GEN_AI_TOOL_TYPE,
        n.USAGE_INPUT: gen_ai.GEN_AI_USAGE_INPUT_TOKENS, n.USAGE_OUTPUT: gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS,
        n.USAGE_CACHE_READ: gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        n.USAGE_CACHE_CREATION: gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        n.USAGE_REASONING: gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, n.TOKEN_TYPE: gen_ai.GEN_AI_TOKEN_TYPE,
        n.ERROR_TYPE: error_attributes.ERROR_TYPE, n.SERVER_ADDRESS: server_attributes.SERVER_ADDRESS,
        n.SERVER_PORT: server_attributes.SERVER_PORT, n.EXCEPTION_TYPE: exception_attributes.EXCEPTION_TYPE,
        n.EXCEPTION_MESSAGE: exception_attributes.EXCEPTION_MESSAGE,
        n.FIRST_CHUNK_METRIC: gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
        n.DURATION_METRIC: gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION,
        n.TOKEN_USAGE_METRIC: gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE,
        n.PROVIDER_OPENAI: gen_ai.GenAiProviderNameValues.OPENAI.value,
    }
    assert [(ours, theirs) for ours, theirs in pairs.items() if ours != theirs] == []
    # No convention-looking name in the module that the conventions lack.
    ours = {value for name, value in vars(n).items() if name.isupper() and isinstance(value, str)}
    foreign = {v for v in ours if v.split(".")[0] in ("gen_ai", "error", "server", "exception") and "." in v}
    assert foreign - ATTRIBUTES - METRICS == set()


async def test_what_a_traced_turn_exports_uses_only_convention_names(
    server: FakeResponsesServer, workspace: Path, traces: Traces, autojump_clock: trio.testing.MockClock
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await trio.sleep(0.5)
        await conn.send_tool_call("resp-tool", "call-1", "noop", {})
        await conn.next_request()
        await conn.send_error("quota gone", code="insufficient_quota")

    async def noop(ctx: ta.ToolContext, args: Any) -> str:
        return "ok"

    tools = ta.Tools.default().function("noop", "Do nothing.", {"type": "object"}, noop)
    async with scripted(script, 30):
        async with ta.open_agent(make_config(server, workspace, tools=tools, tracing=traces.tracing)) as agent:
            with pytest.raises(ta.TurnFailed):  # error.type and the exception event are exported too
                await (await agent.prompt("go")).result()

    spans = traces.spans
    keys = {key for span in spans for key in (span.attributes or {})}
    keys |= {key for span in spans for event in span.events for key in (event.attributes or {})}
    assert {k for k in keys if not k.startswith("trio_agent.")} - ATTRIBUTES == set()
    assert {e.name for span in spans for e in span.events} - {"exception"} <= {"trio_agent.steer"}
    assert {span.name for span in spans if span.name.split(" ")[0] not in OPERATIONS | OWN_OPERATIONS} <= OWN_SPANS
    operations = {(span.attributes or {}).get(n.OPERATION) for span in spans} - {None}
    assert operations - OPERATIONS <= OWN_OPERATIONS  # warmup (and compact) are ours
    assert {"chat", "invoke_agent", "execute_tool"} <= operations

    data = traces.reader.get_metrics_data()
    assert data is not None
    exported = [metric for resource in data.resource_metrics for scope in resource.scope_metrics
                for metric in scope.metrics]
    assert {m.name for m in exported} == {
        gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION, gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE,
        gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
    }
    points = [point for metric in exported for point in metric.data.data_points]
    point_keys = {key for point in points for key in point.attributes or {}}
    assert {k for k in point_keys if not k.startswith("trio_agent.")} - ATTRIBUTES == set()
    token_types = {dict(point.attributes or {}).get(gen_ai.GEN_AI_TOKEN_TYPE) for point in points} - {None}
    assert token_types == TOKEN_TYPES
