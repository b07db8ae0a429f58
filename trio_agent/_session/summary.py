"""Local compaction: the summarization request and the history it installs (pure).

Theory of operation (issue 23, item 3). Remote compaction -- a ``compaction_trigger``
item answered by one opaque ``compaction`` item -- is offered by OpenAI's own backend
only. Against any other Responses server the agent compacts *locally*, as the Codex CLI
does for providers that are not OpenAI:

- *The request.* The conversation as the model sees it (the same prefix and history a
  generation request would carry, chained or replayed in full as usual), then one user
  message holding ``SUMMARIZATION_PROMPT``; ``tool_choice`` is ``"none"``, so the model
  answers in text (codex sends no tools at all; keeping the same tool list with
  ``"none"`` keeps the request's cached prefix and the response chain).
- *The summary* is the text of the response's last assistant message. A response with
  no such text is not a summary: the compaction fails and history stays as it was
  (codex would install an empty summary; losing the context to nothing is worse).
- *The new history* (``compaction.summarized_history``): the real user messages, newest first
  within ``LOCAL_USER_MESSAGE_BUDGET`` tokens (codex's 20,000; the message that
  crosses the budget is cut to what is left, keeping its start and end), rebuilt as
  plain text messages; a fresh permissions message and context message before the last
  of them (before the summary when none is kept), as the remote path places them; last,
  the *bridge*: a user message starting with ``SUMMARY_PREFIX`` and then the summary.
  A bridge is never kept as a user message by a later compaction (``is_summary``).

The rollout records the new history as a ``compacted`` line whose ``message`` is the
bridge text and whose ``replacement_history`` is the new history -- the line codex's
own local compaction writes, and what its resume reads.

The prompt and prefix texts are this project's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .context import user_message

__all__ = [
    "LOCAL_USER_MESSAGE_BUDGET",
    "SUMMARIZATION_PROMPT",
    "SUMMARY_PREFIX",
    "bridge_text",
    "is_summary",
    "message_text",
    "recent_within",
    "summarization_prompt_item",
    "summary_text",
]

Item = dict[str, Any]
LOCAL_USER_MESSAGE_BUDGET = 20_000

SUMMARIZATION_PROMPT = (
    "Context checkpoint. The conversation above is about to be replaced by the note you write now: it is all "
    "that will be left for whoever continues the work (you, or another model). Write that handoff note.\n\n"
    "Cover, briefly and in this order:\n"
    "1. What the user wants, with every constraint and preference they stated.\n"
    "2. What has been done so far: the decisions taken and why, the files touched, the commands run and what "
    "they showed.\n"
    "3. What is still open, as concrete next steps.\n"
    "4. Exact values needed to go on (names, paths, numbers, error messages), quoted, not paraphrased.\n\n"
    "Answer with the note only, in plain text; do not call any tool."
)

SUMMARY_PREFIX = (
    "[Compacted context] The earlier part of this conversation was replaced by the handoff note below, written "
    "by the model that did that work. The workspace (files, processes) is as that work left it: build on it, "
    "do not redo what the note says is done. The note:"
)

_CUT = "\n[... {} characters cut when the conversation was compacted ...]\n"


def summarization_prompt_item() -> Item:
    """The user message that asks for the summary (the last input of the request)."""
    return user_message(SUMMARIZATION_PROMPT)


def message_text(item: Item) -> str:
    """The text parts of a message, joined by newlines (images and others left out)."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [part.get("text") for part in content if isinstance(part, dict)]
    return "\n".join(text for text in texts if isinstance(text, str) and text)


def is_summary(item: Item) -> bool:
    """A bridge message a local compaction installed."""
    return (item.get("type") == "message" and item.get("role") == "user"
            and message_text(item).startswith(SUMMARY_PREFIX))


def summary_text(output: Sequence[Item]) -> str:
    """The summary a summarization response gave: its last assistant message's text,
    stripped ("" when it has none)."""
    for item in reversed(output):
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "assistant":
            text = message_text(item).strip()
            if text:
                return text
    return ""


def _tokens(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4


def _cut(text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` tokens: its start and its end, the middle marked."""
    keep = max(tokens, 0) * 4
    if len(text) <= keep:
        return text
    head, tail = keep // 2, keep - keep // 2
    return text[:head] + _CUT.format(len(text) - keep) + (text[len(text) - tail:] if tail else "")


def recent_within(texts: Sequence[str], budget: int = LOCAL_USER_MESSAGE_BUDGET) -> list[str]:
    """The newest ``texts`` (in their order) within ``budget`` tokens; the one that
    crosses the budget is cut to what is left (``_cut``), older ones are dropped."""
    kept: list[str] = []
    for text in reversed(texts):
        if budget <= 0:
            break
        cost = _tokens(text)
        kept.append(text if cost <= budget else _cut(text, budget))
        budget -= cost
    kept.reverse()
    return kept


def bridge_text(summary: str) -> str:
    """The bridge message's text: ``SUMMARY_PREFIX``, a newline, the summary."""
    return f"{SUMMARY_PREFIX}\n{summary}"
