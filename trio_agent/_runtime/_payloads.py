"""The ``run.started`` and terminal (``run.completed``/``run.failed``) payloads (nanocodex sec. 3.3)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .._config import AgentConfig, Transport
from ._stats import TransportStats, TurnStats

if TYPE_CHECKING:
    from ._turn import TurnState

__all__ = ["run_started_payload", "terminal_payload"]

_NS = 1_000_000_000


def _endpoint(config: AgentConfig) -> str:
    if config.responses.transport is Transport.WEBSOCKET:
        return config.websocket_url.split("?", 1)[0]
    return config.api_base_url + "/responses"


def run_started_payload(config: AgentConfig, workspace: Path, state: TurnState) -> dict[str, Any]:
    return {
        "mode": "openai_model",
        "model": config.model,
        "reasoning_mode": "standard",
        "effort": state.settings.effort,
        "transport": config.responses.transport.value,
        "orchestration": "local_code_mode",
        "websocket_url": _endpoint(config),
        "workspace": str(workspace),
        "instruction_bytes": len(state.prompt.text.encode()),
    }


def terminal_payload(
    config: AgentConfig,
    state: TurnState,
    stats: TurnStats,
    transport: TransportStats,
    mark: TransportStats,
    start: float,
    status: str,
) -> dict[str, Any]:
    elapsed = trio.current_time() - start
    return {
        "status": status,
        "model": config.model,
        "reasoning_mode": "standard",
        "effort": state.settings.effort,
        "transport": config.responses.transport.value,
        "orchestration": "local_code_mode",
        "duration_ms": int(elapsed * 1000),
        "duration_ns": int(elapsed * _NS),
        **stats.to_json(),
        **transport.since(mark),
        "model_duration_ns": stats.model_duration_ns,
        "warmup_duration_ns": transport.warmup_duration_ns - mark.warmup_duration_ns,
        "tool_work_duration_ns": stats.tool_work_duration_ns,
        "tool_wall_duration_ns": stats.tool_wall_duration_ns,
        "usage": stats.usage.to_json(),
        "warmup_usage": (transport.warmup_usage - mark.warmup_usage).to_json(),
        "last_response_id": stats.last_response_id,
        "cost_usd": None,
        "cost_status": "not_reported_by_responses_api",
    }
