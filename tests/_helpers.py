"""Helpers many tests share: the texts of a request's user messages, of one item."""

from __future__ import annotations

from typing import Any

__all__ = ["content_texts", "user_texts"]


def user_texts(body: dict[str, Any]) -> list[str]:
    """The ``input_text`` parts of the user messages in a request body's ``input``, in order."""
    return [part["text"] for item in body["input"]
            if item.get("type") == "message" and item.get("role") == "user"
            for part in item["content"] if part.get("type") == "input_text"]


def content_texts(item: dict[str, Any]) -> list[str]:
    """The text of each content part of one item (``""`` for a part without text)."""
    return [part.get("text", "") for part in item.get("content", [])]
