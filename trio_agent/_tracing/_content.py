"""Opt-in content capture: prompts, instructions, tool definitions, model output, tool
arguments and results as span attributes (the GenAI conventions' opt-in attributes).

Off by default: content holds whatever the user, the model and the tools wrote.
``Tracing(capture_content=True)`` turns it on, or, with ``capture_content`` left
``None``, the conventions' variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
(``true``; read when each agent opens). Each value is JSON text (the Responses API's
items as sent and received, not converted to another schema), redacted like the
cassette -- every credential the agent sends (its API key, ChatGPT tokens) becomes
``<redacted>`` -- and cut to :data:`CONTENT_LIMIT` characters, the cut marked at the
end, so one huge tool output cannot make a span the exporter drops.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._jsontext import dumps
from .._wire.portable import leading_developer_texts

if TYPE_CHECKING:
    from .._runtime._secrets import Redactor

__all__ = ["CONTENT_ENV", "CONTENT_LIMIT", "Content", "env_captures", "split_request"]

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Characters kept of one captured value (a longer one ends with the cut marker).
CONTENT_LIMIT = 32_768
_ON = frozenset({"true", "1", "span_only", "span_and_event"})


def env_captures(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the conventions' variable asks for content on spans."""
    value = (os.environ if environ is None else environ).get(CONTENT_ENV, "")
    return value.strip().lower() in _ON


class Content:
    """One agent's capture: its redactor and the size bound."""

    def __init__(self, redactor: Redactor, limit: int = CONTENT_LIMIT) -> None:
        self._redactor = redactor
        self._limit = limit

    def text(self, value: object) -> str:
        """``value`` as bounded, redacted text (JSON unless it is a string already)."""
        text = value if isinstance(value, str) else dumps(value)
        text = self._redactor.text(text)
        if len(text) > self._limit:
            cut = len(text) - self._limit
            text = f"{text[:self._limit]}...[{cut} more characters not captured]"
        return text


def split_request(body: Mapping[str, Any]) -> tuple[list[Any], Any, Any]:
    """``(input items, tool definitions, instructions)`` of a request body, definitions
    and instructions None when it does not carry them. The OpenAI profile sends the
    tools in an ``additional_tools`` input item and the instructions as the developer
    messages that open the input (``_wire/portable``); the generic profile sends
    top-level ``tools`` and ``instructions``."""
    raw = body.get("input")
    items = [item for item in raw if isinstance(item, dict)] if isinstance(raw, list) else []
    definitions: Any = body.get("tools")
    kept = []
    for item in items:
        if item.get("type") == "additional_tools":
            definitions = [*(definitions or []), *(item.get("tools") or [])]
        else:
            kept.append(item)
    instructions: Any = body.get("instructions")
    if instructions is None and "previous_response_id" not in body:
        texts = leading_developer_texts(kept)
        instructions = "\n\n".join(texts) if texts else None
    return kept, definitions, instructions
