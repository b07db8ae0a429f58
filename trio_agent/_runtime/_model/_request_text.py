"""The JSON text of request bodies, with what every request of a session repeats encoded once.

A body (``_wire.request.build_response_create``) differs from one request to the next
in ``previous_response_id`` and ``input`` only, as long as its settings, transport,
turn state and ``generate`` flag stay the same. ``RequestText`` keeps the text of the
keys before and after those two (encoded and scrubbed as ``_jsontext.dumps`` does) and
encodes just the two per request. The first body of each kind is also encoded in full
and compared: a body whose layout is not the expected one is always encoded in full.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from ..._jsontext import EncodedList, dumps, scrub_surrogates

__all__ = ["RequestText"]

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_VARYING = ("previous_response_id", "input")


class RequestText:
    __slots__ = ("_head", "_key", "_tail")

    def __init__(self) -> None:
        self._key: Hashable = None
        self._head = ""  # '{"type":...,"model":...' (no closing brace)
        self._tail: str | None = None  # '"tool_choice":...}' (no opening brace); None: encode in full

    def text(self, body: dict[str, Any], key: Hashable) -> str:
        """``dumps(body)``; ``key`` names everything but the varying keys (equal keys:
        equal other keys and values)."""
        key = (key, "previous_response_id" in body)
        if key != self._key:
            self._key = key
            self._learn(body)
        if self._tail is None:
            return dumps(body)
        return self._assemble(body)

    def _assemble(self, body: dict[str, Any]) -> str:
        items = body["input"]
        encoded = items.text if type(items) is EncodedList else None
        varying = encoded if encoded is not None else _encode(items)
        previous = body.get("previous_response_id")
        if previous is not None:
            varying = f'"previous_response_id":{_encode(previous)},"input":{varying}'
        else:
            varying = f'"input":{varying}'
        return f"{self._head},{scrub_surrogates(varying)},{self._tail}"

    def _learn(self, body: dict[str, Any]) -> None:
        self._tail = None
        keys = list(body)
        if "input" not in keys or type(body["input"]) not in (list, EncodedList):
            return
        at = keys.index("input")
        before = [k for k in keys[:at] if k != "previous_response_id"]
        if not before or keys[len(before):at + 1] != [k for k in _VARYING if k in body] or not all(
            type(k) is str for k in keys
        ):
            return
        after = keys[at + 1:]
        if not after:
            return
        self._head = scrub_surrogates(_encode({k: body[k] for k in before})[:-1])
        self._tail = scrub_surrogates(_encode({k: body[k] for k in after})[1:])
        if self._assemble(body) != dumps(body):
            self._tail = None
