"""Span names, attribute keys and the small value helpers every tracer module shares.

``gen_ai.*``, ``error.type`` and ``server.*`` are OpenTelemetry semantic conventions
(the GenAI conventions are at Development status); ``trio_agent.*`` are this
library's own. ``docs/tracing.md`` has the table.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "Attributes",
    "server_attributes",
    "usage_attributes",
]

Attributes = dict[str, str | bool | int | float | tuple[str, ...]]

INSTRUMENTATION = "trio_agent"
PROVIDER_OPENAI = "openai"

# -- OpenTelemetry semantic conventions --------------------------------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
USAGE_INPUT = "gen_ai.usage.input_tokens"
USAGE_OUTPUT = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING = "gen_ai.usage.reasoning.output_tokens"
TOKEN_TYPE = "gen_ai.token.type"
# Opt-in content (``_content``).
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
EXCEPTION = "exception"  # the span event of the exception conventions
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
FIRST_CHUNK_METRIC = "gen_ai.client.operation.time_to_first_chunk"
DURATION_METRIC = "gen_ai.client.operation.duration"
TOKEN_USAGE_METRIC = "gen_ai.client.token.usage"

# -- trio_agent ------------------------------------------------------------------------
AGENT_PATH = "trio_agent.agent.path"
AGENT_ORIGIN = "trio_agent.agent.origin"
PARENT_SESSION = "trio_agent.agent.parent_session_id"
TRANSPORT = "trio_agent.transport"
TURN_ID = "trio_agent.turn.id"
TURN_STATUS = "trio_agent.turn.status"
EFFORT = "trio_agent.reasoning.effort"
CALL_INDEX = "trio_agent.model_call.index"
PHASE = "trio_agent.phase"
ATTEMPT = "trio_agent.attempt"
MAX_ATTEMPTS = "trio_agent.attempt.max"
ATTEMPTS = "trio_agent.attempts"
REPLAY_MODE = "trio_agent.replay_mode"
PREVIOUS_RESPONSE_ID = "trio_agent.previous_response_id"
RESPONSE_STATUS = "trio_agent.response.status"
ERROR_CLASS = "trio_agent.error_class"
FAILURE_PHASE = "trio_agent.failure_phase"
RETRYABLE = "trio_agent.retryable"
RETRY_DELAY = "trio_agent.retry.delay_s"
RETRY_SERVER_DELAY = "trio_agent.retry.server_requested"
RETRY_NEW_SOCKET = "trio_agent.retry.opens_new_socket"
CONNECTION_PURPOSE = "trio_agent.connection.purpose"
CONNECTION_GENERATION = "trio_agent.connection.generation"
WARMUP_PATH = "trio_agent.warmup.path"
WARMUP_SOURCE = "trio_agent.warmup.source"
TOOL_STATUS = "trio_agent.tool.status"
TOOL_PARENT_CALL = "trio_agent.tool.parent_call_id"
TOOL_BACKGROUND = "trio_agent.tool.background"
LINK_TYPE = "trio_agent.link.type"

# Turn, compaction and usage totals on the turn span.
TURN_COUNTERS = ("model_calls", "tool_calls", "steers", "compactions", "response_retries")
TURN_COUNTER_KEYS = tuple((name, f"trio_agent.turn.{name}") for name in TURN_COUNTERS)  # (payload, attribute)


def server_attributes(url: str) -> Attributes:
    """``server.address`` / ``server.port`` of an endpoint URL (default ports filled in)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return {}
    port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
    return {SERVER_ADDRESS: parts.hostname, SERVER_PORT: port}


def usage_attributes(raw: Any) -> Attributes:
    """GenAI usage attributes of a Responses ``usage`` object (none for ``usage: null``);
    the detail counts only when the API reported them. A count that is no integer is 0
    (as ``TokenUsage.from_api`` reads it; read here directly, once per response)."""
    if not isinstance(raw, dict):
        return {}
    found: Attributes = {USAGE_INPUT: _count(raw.get("input_tokens")), USAGE_OUTPUT: _count(raw.get("output_tokens"))}
    inputs = raw.get("input_tokens_details")
    if isinstance(inputs, dict):
        if "cached_tokens" in inputs:
            found[USAGE_CACHE_READ] = _count(inputs["cached_tokens"])
        if "cache_write_tokens" in inputs:
            found[USAGE_CACHE_CREATION] = _count(inputs["cache_write_tokens"])
    outputs = raw.get("output_tokens_details")
    if isinstance(outputs, dict) and "reasoning_tokens" in outputs:
        found[USAGE_REASONING] = _count(outputs["reasoning_tokens"])
    return found


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def turn_usage_attributes(totals: Any) -> Attributes:
    """The turn's summed usage (a terminal payload's ``usage``: ``TokenUsage.to_json()``)."""
    if not isinstance(totals, dict):
        return {}
    keys = ((USAGE_INPUT, "input_tokens"), (USAGE_OUTPUT, "output_tokens"),
            (USAGE_CACHE_READ, "cached_input_tokens"), (USAGE_REASONING, "reasoning_output_tokens"))
    return {attr: value for attr, key in keys if isinstance(value := totals.get(key), int)}


def seconds(ns: Any) -> float | None:
    return ns / 1e9 if isinstance(ns, int) and not isinstance(ns, bool) else None


def put(attributes: Attributes, key: str, value: Any) -> None:
    """Set ``key`` when ``value`` is an attribute value (None and odd types are skipped)."""
    if isinstance(value, _VALUE_TYPES):
        attributes[key] = value


def put_fields(attributes: Attributes, payload: dict[str, Any], fields: tuple[tuple[str, str], ...]) -> None:
    """``put`` of each ``(attribute, payload field)`` pair."""
    for key, field in fields:
        value = payload.get(field)
        if isinstance(value, _VALUE_TYPES):
            attributes[key] = value


_VALUE_TYPES = (str, bool, int, float)  # a tuple: isinstance is faster with it than with a union
