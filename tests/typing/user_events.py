"""A user's file that reads events through ``ta.payload_of``; type-checked, never run.

``tests/test_event_typing.py`` runs ``mypy --strict --disallow-any-expr`` on it (and
pyright in strict mode when it is installed): every ``assert_type`` must hold, so no
field a user reads is ``Any``. The last function names every kind, so an overload
missing from ``payload_of`` (or returning the wrong class) fails here too.
"""

from __future__ import annotations

from typing import Literal, assert_type

import trio

import trio_agent as ta

K = ta.EventKind


def show_tool(event: ta.AgentEvent) -> str | None:
    call = ta.payload_of(event, K.TOOL_CALL)
    if call is None:
        return None
    assert_type(call, ta.ToolCallPayload)
    assert_type(call["call_id"], str)
    assert_type(call["arguments"], ta.JsonValue)
    assert_type(call["model_call_index"], int | None)
    if "background" in call:
        assert_type(call["background"], Literal[True])
    arguments = call["arguments"]
    if isinstance(arguments, dict) and "cmd" in arguments:
        command: ta.JsonValue = arguments["cmd"]  # a JSON object's values are JSON values
        return f"{call['tool']}: {command!r}"
    return f"{call['tool']}({arguments!r})"


def show_result(event: ta.AgentEvent) -> str:
    result = ta.payload_of(event, K.TOOL_RESULT)
    if result is None:
        return ""
    assert_type(result["status"], Literal["completed", "failed", "cancelled"])
    assert_type(result["result"], str | list[ta.JsonValue])
    started = result.get("started_after_ns", 0)
    assert_type(started, int)
    body = result["result"]
    return body if isinstance(body, str) else f"{len(body)} items"


def summarize(event: ta.AgentEvent) -> str:
    if (done := ta.payload_of(event, K.RUN_COMPLETED)) is not None:
        assert_type(done["status"], Literal["completed"])
        assert_type(done["usage"], ta.TokenCounts)
        assert_type(done["usage"]["cached_input_tokens"], int)
        assert_type(done["last_response_id"], str | None)
        assert_type(done["cost_usd"], None)
        return f"{done['model_calls']} calls, {done['usage']['total_tokens']} tokens"
    if (failed := ta.payload_of(event, K.RUN_FAILED)) is not None:
        assert_type(failed["status"], Literal["failed", "cancelled"])
        assert_type(failed["duration_ns"], int)
        if "reason" in failed:  # a cancelled turn says why
            return f"cancelled: {failed['reason']}"
        return failed["status"]
    if (plan := ta.payload_of(event, K.PLAN_UPDATED)) is not None:
        for step in plan["plan"]:
            assert_type(step, ta.PlanStep)
            assert_type(step["status"], Literal["pending", "in_progress", "completed"])
        assert_type(plan["explanation"], str | None)
        return "\n".join(step["step"] for step in plan["plan"])
    if (frame := ta.payload_of(event, K.API_EVENT)) is not None:
        assert_type(frame["direction"], Literal["inbound", "outbound"])
        assert_type(frame["event"], dict[str, ta.JsonValue])
        kind = frame["event"].get("type")
        return kind if isinstance(kind, str) else "?"
    if (call := ta.payload_of(event, K.MODEL_CALL_COMPLETED)) is not None:
        assert_type(call["time_to_first_output_ns"], int | None)
        assert_type(call["usage"], dict[str, ta.JsonValue] | None)
        return call["response_id"]
    if (ready := ta.payload_of(event, K.MCP_SERVER_READY)) is not None:
        assert_type(ready["tools"], list[str])
        return ready["server"]
    return str(event.kind)


def any_kind(event: ta.AgentEvent, kind: ta.EventKind) -> None:
    payload = ta.payload_of(event, kind)  # a kind known only at runtime: the union
    assert_type(payload, ta.EventPayload | None)
    declared = ta.EVENT_PAYLOADS[kind]
    assert_type(declared, type)


async def watch(agent: ta.Agent, out: trio.abc.SendStream) -> None:
    async for event in agent.events:
        line = show_tool(event) or show_result(event) or summarize(event)
        await out.send_all(line.encode() + b"\n")


def every_kind(e: ta.AgentEvent) -> None:
    assert_type(ta.payload_of(e, K.RUN_STARTED), ta.RunStartedPayload | None)
    assert_type(ta.payload_of(e, K.RUN_STEERED), ta.RunSteeredPayload | None)
    assert_type(ta.payload_of(e, K.RUN_ERROR), ta.RunErrorPayload | None)
    assert_type(ta.payload_of(e, K.RUN_COMPLETED), ta.RunCompletedPayload | None)
    assert_type(ta.payload_of(e, K.RUN_FAILED), ta.RunFailedPayload | None)
    assert_type(ta.payload_of(e, K.ASSISTANT_DELTA), ta.AssistantDeltaPayload | None)
    assert_type(ta.payload_of(e, K.ASSISTANT_MESSAGE), ta.AssistantMessagePayload | None)
    assert_type(ta.payload_of(e, K.REASONING_SUMMARY_DELTA), ta.ReasoningSummaryDeltaPayload | None)
    assert_type(ta.payload_of(e, K.TOOL_CALL), ta.ToolCallPayload | None)
    assert_type(ta.payload_of(e, K.TOOL_RESULT), ta.ToolResultPayload | None)
    assert_type(ta.payload_of(e, K.TOOL_PROGRESS), ta.ToolProgressPayload | None)
    assert_type(ta.payload_of(e, K.TOOL_BLOCKED), ta.ToolBlockedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_WARMUP_STARTED), ta.ModelWarmupStartedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_WARMUP_COMPLETED), ta.ModelWarmupCompletedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_WARMUP_FAILED), ta.ModelWarmupFailedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_CALL_STARTED), ta.ModelCallStartedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_CALL_COMPLETED), ta.ModelCallCompletedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_CALL_FAILED), ta.ModelCallFailedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_COMPACTION_STARTED), ta.ModelCompactionStartedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_COMPACTION_COMPLETED), ta.ModelCompactionCompletedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_COMPACTION_FAILED), ta.ModelCompactionFailedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_COMPACTION_FALLBACK), ta.ModelCompactionFallbackPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_ATTEMPT_STARTED), ta.ModelAttemptStartedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_ATTEMPT_FAILED), ta.ModelAttemptFailedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_ATTEMPT_RETRYING), ta.ModelAttemptRetryingPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_CONNECTION_STARTED), ta.ModelConnectionStartedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_CONNECTION_COMPLETED), ta.ModelConnectionCompletedPayload | None)
    assert_type(ta.payload_of(e, K.MODEL_CONNECTION_FAILED), ta.ModelConnectionFailedPayload | None)
    assert_type(ta.payload_of(e, K.SLEEP_STARTED), ta.SleepStartedPayload | None)
    assert_type(ta.payload_of(e, K.SLEEP_COMPLETED), ta.SleepCompletedPayload | None)
    assert_type(ta.payload_of(e, K.AGENT_ASLEEP), ta.AgentAsleepPayload | None)
    assert_type(ta.payload_of(e, K.AGENT_WOKE), ta.AgentWokePayload | None)
    assert_type(ta.payload_of(e, K.PLAN_UPDATED), ta.PlanUpdatedPayload | None)
    assert_type(ta.payload_of(e, K.MCP_SERVER_READY), ta.McpServerReadyPayload | None)
    assert_type(ta.payload_of(e, K.MCP_SERVER_FAILED), ta.McpServerFailedPayload | None)
    assert_type(ta.payload_of(e, K.MCP_SERVER_RESTARTING), ta.McpServerRestartingPayload | None)
    assert_type(ta.payload_of(e, K.MCP_PROGRESS), ta.McpProgressPayload | None)
    assert_type(ta.payload_of(e, K.MCP_LOG), ta.McpLogPayload | None)
    assert_type(ta.payload_of(e, K.APPROVAL_REQUESTED), ta.ApprovalRequestedPayload | None)
    assert_type(ta.payload_of(e, K.APPROVAL_RESOLVED), ta.ApprovalResolvedPayload | None)
    assert_type(ta.payload_of(e, K.SANDBOX_UNAVAILABLE), ta.SandboxUnavailablePayload | None)
    assert_type(ta.payload_of(e, K.API_EVENT), ta.ApiEventPayload | None)
    assert_type(ta.payload_of(e, K.API_WARNING), ta.ApiWarningPayload | None)


def show_approval(event: ta.AgentEvent) -> list[str]:
    request = ta.payload_of(event, K.APPROVAL_REQUESTED)
    if request is None:
        return []
    assert_type(request["kind"], Literal["command", "file_change"])
    changes: list[ta.ApprovalChange] = request.get("changes", [])
    return [change["path"] for change in changes]
