"""The codex seeds' ``core_test_support::responses`` frame helpers, byte for byte, for the
ports of ``seeds/codex_*`` (their mock servers' half of each test is exactly this JSON on
the wire), the seeds' ``message_input_texts``, and ``request_turns``, what their
``assert_root_turn`` becomes here."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import trio_agent as ta
from trio_agent.testing import EventLog

__all__ = [
    "ev_assistant_message",
    "ev_completed",
    "ev_message_item_added",
    "ev_output_text_delta",
    "ev_reasoning_item",
    "ev_reasoning_item_added",
    "ev_response_created",
    "message_input_texts",
    "request_turns",
    "sse_failed",
    "user_message_item",
]


def ev_response_created(response_id: str) -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": response_id}}


def ev_completed(response_id: str) -> dict[str, Any]:
    usage = {"input_tokens": 0, "input_tokens_details": None, "output_tokens": 0,
             "output_tokens_details": None, "total_tokens": 0}
    return {"type": "response.completed", "response": {"id": response_id, "usage": usage}}


def ev_assistant_message(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "response.output_item.done", "item": {
        "type": "message", "role": "assistant", "id": item_id, "content": [{"type": "output_text", "text": text}]
    }}


def ev_reasoning_item_added(item_id: str, summary: Sequence[str]) -> dict[str, Any]:
    entries = [{"type": "summary_text", "text": text} for text in summary]
    return {"type": "response.output_item.added", "item": {"type": "reasoning", "id": item_id, "summary": entries}}


def ev_reasoning_item(item_id: str, summary: Sequence[str], raw_content: Sequence[str]) -> dict[str, Any]:
    entries = [{"type": "summary_text", "text": text} for text in summary]
    encrypted = base64.b64encode(("b" * 550 + "".join(raw_content)).encode()).decode()
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": entries, "encrypted_content": encrypted}
    if raw_content:
        item["content"] = [{"type": "reasoning_text", "text": text} for text in raw_content]
    return {"type": "response.output_item.done", "item": item}


def ev_message_item_added(item_id: str, text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return {"type": "response.output_item.added",
            "item": {"type": "message", "role": "assistant", "id": item_id, "content": content}}


def ev_output_text_delta(delta: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "delta": delta}


def sse_failed(response_id: str, code: str, message: str) -> dict[str, Any]:
    return {"type": "response.failed", "response": {"id": response_id, "error": {"code": code, "message": message}}}


def user_message_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def message_input_texts(body: dict[str, Any], role: str) -> list[str]:
    """The seed's ``message_input_texts``: every ``input_text`` of ``role``'s messages."""
    return [
        span["text"]
        for item in body.get("input", [])
        if item.get("type") == "message" and item.get("role") == role
        for span in item.get("content") or []
        if span.get("type") == "input_text"
    ]


def request_turns(log: EventLog) -> list[int | None]:
    """The turn id of every generation request, in order. The seeds' ``assert_root_turn``
    checks a request's ``client_metadata.turn_id``; requests here carry no turn id on the
    wire, so the ports check the turn id of the request's ``model.attempt.started`` event."""
    return [e.turn_id for e in log.events
            if e.kind is ta.EventKind.MODEL_ATTEMPT_STARTED and e.payload.get("phase") == "generation"]
