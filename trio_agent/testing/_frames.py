"""Builders for the server frames a scripted test sends (plain JSON dicts), and what a
compaction request looks like (``is_compaction_request``, ``is_summarization_request``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "assistant_message",
    "compaction_item",
    "completed",
    "custom_tool_call",
    "error_frame",
    "function_call",
    "is_compaction_request",
    "is_summarization_request",
    "output_item_added",
    "output_item_done",
    "response_created",
    "text_delta",
    "usage",
]


def usage(total_tokens: int = 12) -> dict[str, Any]:
    """The usage block the reference tests send (10 in, 5 cached, 2 out, 1 reasoning)."""
    return {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 5},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 1},
        "total_tokens": total_tokens,
    }


def response_created(response_id: str) -> dict[str, Any]:
    """``response.created``: the first frame of a live response (carries its id)."""
    return {"type": "response.created", "response": {"id": response_id}}


def assistant_message(
    text: str, *, item_id: str | None = None, phase: str | None = None
) -> dict[str, Any]:
    """An assistant ``message`` item with one ``output_text`` part; a ``phase``
    (``"commentary"`` or ``"final_answer"``) also marks it ``completed``."""
    item: dict[str, Any] = {}
    if item_id is not None:
        item["id"] = item_id
    item.update({"type": "message", "role": "assistant"})
    if phase is not None:
        item["status"] = "completed"
        item["phase"] = phase
    item["content"] = [{"type": "output_text", "text": text}]
    return item


def custom_tool_call(call_id: str, name: str, input: str, *, item_id: str | None = None) -> dict[str, Any]:
    """A ``custom_tool_call`` output item (freeform ``input``, as the model calls ``exec``)."""
    item: dict[str, Any] = {"id": item_id} if item_id else {}
    item.update({"type": "custom_tool_call", "call_id": call_id, "name": name, "input": input})
    return item


def function_call(
    call_id: str, name: str, arguments: str, *, namespace: str | None = None, item_id: str | None = None
) -> dict[str, Any]:
    """A ``function_call`` output item; ``arguments`` is the JSON text the model wrote
    (pass ``json.dumps(args)``, or deliberately broken JSON for a hostile case)."""
    item: dict[str, Any] = {"id": item_id} if item_id else {}
    item.update({"type": "function_call", "call_id": call_id})
    if namespace is not None:
        item["namespace"] = namespace
    item.update({"name": name, "arguments": arguments})
    return item


def completed(
    response_id: str,
    output: Sequence[dict[str, Any]] = (),
    *,
    usage_block: dict[str, Any] | str | None = "default",
    end_turn: bool | None = None,
) -> dict[str, Any]:
    """``response.completed`` with ``output`` items. ``usage_block`` defaults to
    ``usage()``; ``None`` sends ``"usage": null`` (a warmup's reply). ``end_turn``
    is sent only when given."""
    response: dict[str, Any] = {"id": response_id, "status": "completed", "output": list(output)}
    response["usage"] = usage() if usage_block == "default" else usage_block
    if end_turn is not None:
        response["end_turn"] = end_turn
    return {"type": "response.completed", "response": response}


def output_item_added(output_index: int, item: dict[str, Any]) -> dict[str, Any]:
    """``response.output_item.added``: an output item starts streaming at ``output_index``."""
    return {"type": "response.output_item.added", "output_index": output_index, "item": item}


def output_item_done(output_index: int, item: dict[str, Any]) -> dict[str, Any]:
    """``response.output_item.done``: the finished ``item`` at ``output_index``."""
    return {"type": "response.output_item.done", "output_index": output_index, "item": item}


def text_delta(output_index: int, delta: str) -> dict[str, Any]:
    """``response.output_text.delta``: a piece of the assistant text (``assistant.delta``)."""
    return {
        "type": "response.output_text.delta",
        "output_index": output_index,
        "content_index": 0,
        "delta": delta,
    }


def error_frame(message: str, *, code: str | None = None, **extra: Any) -> dict[str, Any]:
    """An ``error`` frame; ``code`` picks the failure (e.g. ``"rate_limit_exceeded"``,
    ``"server_is_overloaded"``, ``"previous_response_not_found"``, ``"insufficient_quota"``)
    and ``extra`` lands in the error object (``retry_after=1.5``)."""
    error: dict[str, Any] = {"message": message}
    if code is not None:
        error["code"] = code
    error.update(extra)
    return {"type": "error", "error": error}


def compaction_item(
    encrypted_content: str = "opaque-summary", *, item_id: str | None = "cmp-server-id"
) -> dict[str, Any]:
    """A ``compaction`` output item: the one item a remote compaction returns."""
    item: dict[str, Any] = {"id": item_id} if item_id else {}
    item.update({"type": "compaction", "encrypted_content": encrypted_content})
    return item


def is_compaction_request(body: dict[str, Any]) -> bool:
    """The request asks for a remote compaction: its input ends with ``compaction_trigger``.
    A server without remote compaction answers it like any other request (and the agent
    then compacts locally: ``is_summarization_request``)."""
    items = body.get("input") or []
    return bool(items) and isinstance(items[-1], dict) and items[-1].get("type") == "compaction_trigger"


def is_summarization_request(body: dict[str, Any]) -> bool:
    """The request asks for a local compaction's summary: its last input is the
    runtime's summarization prompt (and ``tool_choice`` is ``"none"``). Answer it with
    an assistant message: its text becomes the summary."""
    from .._session.summary import SUMMARIZATION_PROMPT

    items = body.get("input") or []
    last = items[-1] if items else None
    if not isinstance(last, dict) or last.get("type") != "message" or last.get("role") != "user":
        return False
    content = last.get("content")
    texts = [part.get("text") for part in content if isinstance(part, dict)] if isinstance(content, list) else []
    return texts == [SUMMARIZATION_PROMPT]
