"""Reading request params with errors that say what was wrong (JSON-RPC -32602).

``Params(method, raw)`` wraps a request's ``params`` (an object, or absent); each
accessor checks one field and raises ``InvalidParams`` naming the method, the field,
what it must be and what it was.
"""

from __future__ import annotations

import math
from typing import Any

from ._jsonrpc import InvalidParams, shown

__all__ = ["Params", "seconds", "shown"]


def seconds(value: object) -> float | None:
    """``value`` as a finite number of seconds >= 0, or None (a bool, a string, a
    negative number or one too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        converted = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return converted if 0 <= converted < math.inf else None


class Params:
    def __init__(self, method: str, raw: object) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams(f"{method}: params must be a JSON object, got {shown(raw)}")
        self.method = method
        self.raw: dict[str, Any] = raw

    def _wrong(self, name: str, expected: str, value: object) -> InvalidParams:
        return InvalidParams(f"{self.method}: `{name}` must be {expected}, got {shown(value)}")

    def _required(self, name: str) -> Any:
        if self.raw.get(name) is None:
            raise InvalidParams(f"{self.method}: missing required field `{name}`")
        return self.raw[name]

    def string(self, name: str) -> str:
        value = self._required(name)
        if not isinstance(value, str) or not value:
            raise self._wrong(name, "a non-empty string", value)
        return value

    def opt_string(self, name: str) -> str | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._wrong(name, "a string or null", value)
        return value

    def opt_bool(self, name: str) -> bool | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self._wrong(name, "true, false or null", value)
        return value

    def opt_int(self, name: str, *, minimum: int = 0) -> int | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._wrong(name, f"an integer >= {minimum} or null", value)
        return value

    def opt_seconds(self, name: str) -> float | None:
        value = self.raw.get(name)
        if value is None:
            return None
        converted = seconds(value)
        if converted is None:
            raise self._wrong(name, "a finite number of seconds >= 0", value)
        return converted

    def array(self, name: str) -> list[Any]:
        value = self._required(name)
        if not isinstance(value, list):
            raise self._wrong(name, "an array", value)
        return value

    def opt_list(self, name: str) -> list[Any] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self._wrong(name, "an array or null", value)
        return value

    def opt_object(self, name: str) -> dict[str, Any] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self._wrong(name, "an object or null", value)
        return value

    def get(self, name: str) -> Any:
        return self.raw.get(name)
