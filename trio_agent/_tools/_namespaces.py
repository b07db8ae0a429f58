"""Namespaced built-in tool groups, opt-in: ``clock`` (``sleep``) and, with the
multi-agent tools, ``collaboration``.

The model sees each group as one Responses ``namespace`` tool
(``{"type": "namespace", "name": ..., "description": ..., "tools": [function tools]}``)
and calls its tools with ``function_call`` items that carry ``namespace``. Definitions
are our own wording; shapes and limits follow codex (codex.md 3.7).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLOCK", "SLEEP_MAX_MS", "SLEEP_MIN_MS", "clock_namespace", "namespace_definition"]

CLOCK = "clock"
SLEEP_MIN_MS = 1
SLEEP_MAX_MS = 12 * 60 * 60 * 1000  # 12 h


def namespace_definition(name: str, description: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "namespace", "name": name, "description": description, "tools": tools}


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "name": name, "description": description, "strict": False, "parameters": parameters}


def clock_namespace() -> dict[str, Any]:
    sleep = _function(
        "sleep",
        "Wait for a while without using tokens, e.g. for a long-running job or for other agents. "
        "Returns early, saying so, as soon as new input arrives (a message from the user or "
        "another agent).",
        {
            "type": "object",
            "properties": {"duration_ms": {
                "type": "number", "description": f"How long to sleep, {SLEEP_MIN_MS} ms to 12 hours.",
            }},
            "required": ["duration_ms"],
            "additionalProperties": False,
        },
    )
    return namespace_definition(CLOCK, "Time: wait without working.", [sleep])
