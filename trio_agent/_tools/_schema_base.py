"""The pieces every schema node shares: the node interface, error paths and the
rendering of a value the model sent (split from ``_schema`` so the extra node kinds
in ``_schema_types`` and ``_schema_pydantic`` can use them without a cycle)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import uuid
from decimal import Decimal
from pathlib import PurePath
from typing import Any

import attrs

__all__ = ["INVALID", "JSON_NAMES", "Node", "describe_value", "fail", "join", "to_json_value"]

INVALID = object()
JSON_NAMES = {
    "string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
    "null": "null", "array": "an array", "object": "an object",
}


def describe_value(value: object, limit: int = 60) -> str:
    """A short JSON-ish rendering of a value the model sent."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def fail(errors: list[str], path: str, message: str) -> object:
    errors.append(f"{path or 'arguments'}: {message}")
    return INVALID


class Node:
    schema: dict[str, Any]
    strict = True
    expected = "a value"

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        """The converted value, or ``INVALID`` after appending one message per bad field."""
        raise NotImplementedError


def to_json_value(value: object) -> object:
    """A typed tool's return value as plain JSON data: dataclasses, attrs classes and
    pydantic models become objects, enums their values, tuples arrays, ``datetime``,
    ``date``, ``time`` ISO 8601 strings, ``UUID``, ``Path`` and ``Decimal`` strings;
    anything else is left for the output encoder to judge."""
    if isinstance(value, enum.Enum):
        return to_json_value(value.value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | PurePath | Decimal):
        return str(value)
    if getattr(type(value), "__pydantic_validator__", None) is not None and hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if attrs.has(type(value)):
        fields = attrs.fields(type(value))  # type: ignore[arg-type]
        return {a.alias or a.name: to_json_value(getattr(value, a.name)) for a in fields}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json_value(v) for k, v in value.items()}
    return value
