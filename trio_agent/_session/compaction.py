"""Auto-compaction decisions and the history it installs (pure; SPEC sec. 8).

Theory of operation: after a tool batch, an ``end_turn: false`` response, a response
that continues for pending steers, and before sampling a new prompt, the agent
estimates the active context: the last response's ``usage.total_tokens`` plus a
local estimate of the items added since (about 4 bytes per token of JSON). At 90% of
the model's window it asks the server to compact: a request chained on the last
response whose input is what it has not seen plus ``{"type":"compaction_trigger"}``.
The single ``compaction`` item returned replaces the history: a fresh permissions
message and context message (re-reading AGENTS.md), the real user messages (newest
first within a 64,000-token budget; the context goes before the last of them), then
the compaction item without an id. The next request replays that in full.

A server that offers no remote compaction gets a local one instead (``summary``: a
summarization request whose text answer becomes a bridge message); its history is
built by ``summarized_history`` the same way, with the kept user messages rebuilt as
text and the bridge last.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .context import user_message
from .history import History
from .summary import bridge_text, is_summary, message_text, recent_within

__all__ = [
    "COMPACTION_TRIGGER",
    "USER_MESSAGE_BUDGET",
    "auto_compact_limit",
    "compacted_history",
    "estimate_history_tokens",
    "estimate_tokens",
    "is_real_user_message",
    "summarized_history",
    "truncate_tool_outputs",
]

Item = dict[str, Any]
COMPACTION_TRIGGER: Item = {"type": "compaction_trigger"}
USER_MESSAGE_BUDGET = 64_000
TRUNCATED_OUTPUT = "Output exceeded the available model context and was truncated"
_CONTEXT_MARKERS = ("<environment_context>", "# AGENTS.md instructions for", "<turn_aborted>")


def auto_compact_limit(context_window: int) -> int:
    return context_window * 9 // 10


def estimate_tokens(items: Iterable[Item]) -> int:
    """About one token per 4 bytes of the items' JSON."""
    return sum(len(json.dumps(item, separators=(",", ":"))) for item in items) // 4


def estimate_history_tokens(history: History, start: int = 0) -> int:
    """``estimate_tokens(history.since(start))``, from the sizes the history keeps per
    segment (each item is serialised once, not at every model call)."""
    return history.json_size_since(start) // 4


def _text(item: Item) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def is_real_user_message(item: Item) -> bool:
    """A message the user (or a steer) wrote -- not a context or abort marker, nor a
    local compaction's summary."""
    if item.get("type") != "message" or item.get("role") != "user" or is_summary(item):
        return False
    text = _text(item)
    return not any(marker in text for marker in _CONTEXT_MARKERS)


def compacted_history(
    history: Sequence[Item], compaction: Item, *, permissions: Item, context: Item
) -> list[Item]:
    """The history after compaction (see the module docstring)."""
    kept: list[Item] = []
    budget = USER_MESSAGE_BUDGET
    for item in reversed(history):
        if not is_real_user_message(item):
            continue
        cost = estimate_tokens([item])
        if cost > budget:
            break
        budget -= cost
        kept.append(item)
    kept.reverse()
    summary = {k: v for k, v in compaction.items() if k != "id"}
    if not kept:
        return [permissions, context, summary]
    return [*kept[:-1], permissions, context, kept[-1], summary]


def summarized_history(
    history: Sequence[Item], summary: str, *, permissions: Item, context: Item
) -> tuple[list[Item], str]:
    """The history after a local compaction (``summary`` module docstring), and the
    bridge text at its end."""
    texts = [text for item in history if is_real_user_message(item) and (text := message_text(item))]
    kept = [user_message(text) for text in recent_within(texts)]
    bridge = bridge_text(summary)
    if not kept:
        return [permissions, context, user_message(bridge)], bridge
    return [*kept[:-1], permissions, context, kept[-1], user_message(bridge)], bridge


def truncate_tool_outputs(history: list[Item], *, window: int) -> list[Item]:
    """Rewrite the newest run of tool outputs (newest first) until the estimate fits."""
    result = list(history)
    index = len(result) - 1
    while index >= 0 and estimate_tokens(result) > window:
        item = result[index]
        if item.get("type") not in ("custom_tool_call_output", "function_call_output"):
            break
        result[index] = {**item, "output": TRUNCATED_OUTPUT}
        index -= 1
    return result
