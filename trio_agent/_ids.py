"""Identifiers: UUIDv7 session ids and client item ids with type prefixes.

Client item ids look like ``<prefix>_<uuid7>`` (``ctco_...`` for a custom tool call
output, ``fco_...`` for a function call output, ``msg_...`` for messages): the prefix
is what marks an id as client-assigned, so replays keep it (SPEC sec. 2).
"""

from __future__ import annotations

import os
import time
import uuid

__all__ = ["ID_PREFIXES", "new_item_id", "uuid7", "uuid7_text"]

# Item type -> id prefix (reference: nanocodex sec. 4.6).
ID_PREFIXES = {
    "message": "msg",
    "agent_message": "amsg",
    "reasoning": "rs",
    "local_shell_call": "lsh",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "tool_search_call": "tsc",
    "tool_search_output": "tso",
    "web_search_call": "ws",
    "image_generation_call": "ig",
    "compaction": "cmp",
}


def _uuid7_int() -> int:
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return value


def uuid7() -> uuid.UUID:
    """A time-ordered UUID (RFC 9562 version 7): 48-bit Unix ms, then random bits."""
    return uuid.UUID(int=_uuid7_int())


def uuid7_text() -> str:
    """``str(uuid7())`` without building the ``UUID`` or the 128-bit int (session and
    item ids, per fork and per item: the bytes' hex is a third cheaper than the int's
    formatting): 48-bit Unix ms, then 80 random bits with the version and variant set."""
    raw = bytearray(((time.time_ns() // 1_000_000) & _MS_MASK).to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70  # version 7
    raw[8] = (raw[8] & 0x3F) | 0x80  # variant 0b10
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_MS_MASK = (1 << 48) - 1


def new_item_id(item_type: str) -> str | None:
    """A fresh client id for an item of ``item_type``, or None for id-less types."""
    prefix = ID_PREFIXES.get(item_type)
    if prefix is None:
        return None
    return f"{prefix}_{uuid7_text()}"


SESSION_ID_MAX = 128
_SESSION_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:@+-")


def session_id_problem(value: object) -> str | None:
    """Why ``value`` cannot be a session (thread) id, or None when it can.

    A session id names the rollout file and travels in headers, so it is a short
    token: 1 to 128 of ``A-Z a-z 0-9 . _ : @ + -``, not starting with a dot (no path
    separators, ``..``, whitespace, control or glob characters).
    """
    if not isinstance(value, str) or not value:
        return "it must be a non-empty string"
    if len(value) > SESSION_ID_MAX:
        return f"it is {len(value)} characters long; at most {SESSION_ID_MAX} are allowed"
    bad = sorted({char for char in value if char not in _SESSION_ID_CHARS})
    if bad:
        shown = ", ".join(repr(char) for char in bad[:5])
        return f"it contains {shown}; use letters, digits and . _ : @ + - only"
    if value.startswith("."):
        return "it starts with a dot"
    return None
