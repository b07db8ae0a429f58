"""A user tool the test holds running (the seeds' ``held_tool`` dynamic tool, answered
by the test), and the text of a call's output in a request body."""

from __future__ import annotations

from typing import Any

import trio

import trio_agent as ta

__all__ = ["held_tool", "output_text"]


def held_tool(started: trio.Event, release: trio.Event, calls: list[str]) -> ta.Tools:
    """The default tools plus ``held_tool``: each call appends its call id to ``calls``,
    sets ``started`` and returns ``"held tool result"`` once ``release`` is set."""

    async def handler(ctx: ta.ToolContext, args: Any) -> str:
        calls.append(ctx.call_id)
        started.set()
        await release.wait()
        return "held tool result"

    return ta.Tools.default().function("held_tool", "A tool held by the test.", {"type": "object"}, handler)


def output_text(body: dict[str, Any], kind: str, call_id: str) -> str | None:
    """The text of the first ``kind`` output (``function_call_output``,
    ``custom_tool_call_output``) of ``call_id`` in ``body``'s input (its parts joined)."""
    for item in body["input"]:
        if item.get("type") == kind and item.get("call_id") == call_id:
            output = item["output"]
            return output if isinstance(output, str) else "\n".join(p.get("text", "") for p in output)
    return None
