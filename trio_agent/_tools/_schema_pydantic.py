"""Pydantic models and ``TypeAdapter`` types as typed-tool parameters.

pydantic is optional: this module is imported only for an annotation that needs it (a
class with ``__pydantic_validator__``, which the user's own import of pydantic made, or
a type nothing else here can describe), so ``import trio_agent`` never loads it.

The schema is pydantic's own (validation mode), with its ``$defs`` hoisted to the tool's
parameters (a clash of names with another class is renamed) and every object pydantic
leaves open (``extra="ignore"``, its default) closed with ``additionalProperties:
false``: the model is told exactly the fields there are, and a field it invents is an
error (checked here, since pydantic would drop it silently) rather than lost. Values are
validated in JSON mode (``validate_json``: ``"2024-01-02"`` is a date even in a strict
model), and each of pydantic's errors becomes ``path: message, got value``.
"""

from __future__ import annotations

import importlib.util
import json
import typing
from typing import Any

from .._errors import ConfigError
from ._schema_base import INVALID, Node, describe_value, fail, join

__all__ = ["PydanticNode", "is_pydantic_class", "pydantic_installed"]

_MAX_WALK = 200  # levels of nesting the field check follows


def is_pydantic_class(hint: object) -> bool:
    """A pydantic model or pydantic dataclass (known without importing pydantic)."""
    return isinstance(hint, type) and getattr(hint, "__pydantic_validator__", None) is not None


def pydantic_installed() -> bool:
    return importlib.util.find_spec("pydantic") is not None


def _close(schema: object) -> None:
    """``additionalProperties: false`` on every object with properties that says nothing
    (following subschemas only: a field named ``properties`` is not an object)."""
    if not isinstance(schema, dict):
        return
    properties = schema.get("properties")
    if isinstance(properties, dict):
        schema.setdefault("additionalProperties", False)
        for sub in properties.values():
            _close(sub)
    for key in ("items", "additionalProperties", "not"):
        _close(schema.get(key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for sub in schema.get(key) or ():
            _close(sub)
    for sub in (schema.get("$defs") or {}).values():
        _close(sub)


def _rename(schema: object, names: dict[str, str]) -> object:
    if isinstance(schema, dict):
        out = {k: _rename(v, names) for k, v in schema.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in names:
            out["$ref"] = "#/$defs/" + names[ref[8:]]
        return out
    if isinstance(schema, list):
        return [_rename(v, names) for v in schema]
    return schema


class PydanticNode(Node):
    def __init__(self, hint: object, owner: str, defs: dict[str, Any]) -> None:
        import pydantic

        try:
            adapter_of: Any = pydantic.TypeAdapter  # it takes any annotation; its stub asks for a TypeForm
            self.adapter: Any = adapter_of(hint)
            schema = self.adapter.json_schema(ref_template="#/$defs/{model}")
        except pydantic.PydanticUserError as exc:  # no core schema, or no JSON schema for it
            first = str(exc).splitlines()[0]
            raise ConfigError(f"{owner}: the annotation {hint!r} has no JSON form ({first})") from None
        _close(schema)
        local = schema.pop("$defs", {})
        names: dict[str, str] = {}
        for name, definition in local.items():
            unique, n = name, 2
            while unique in defs and defs[unique] != definition:
                unique, n = f"{name}{n}", n + 1
            names[name] = unique
        schema = typing.cast(dict[str, Any], _rename(schema, names))
        for name, definition in local.items():
            defs[names[name]] = _rename(definition, names)
        self.schema = schema
        self.defs = defs
        self.expected = "a value matching the schema"
        self.strict = True  # the whole parameters schema is judged by _strict

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        before = len(errors)
        _unexpected_fields(value, self.schema, self.defs, path, errors, 0)
        import pydantic

        try:
            converted = self.adapter.validate_json(json.dumps(value))
            return converted if len(errors) == before else INVALID
        except pydantic.ValidationError as exc:
            for error in exc.errors(include_url=False):
                where = path
                for key in error.get("loc", ()):
                    where = join(where, key if isinstance(key, int) else str(key))
                kind, message = error.get("type"), str(error.get("msg"))
                if kind == "missing":
                    fail(errors, where, "required field is missing")
                elif kind == "json_invalid":  # of the text made here: its position means nothing to the model
                    fail(errors, where, "nests too deeply" if "recursion" in message else message.split(" at line")[0])
                else:
                    fail(errors, where, f"{message}, got {describe_value(error.get('input'))}")
            return INVALID


def _unexpected_fields(value: object, schema: object, defs: dict[str, Any], path: str, errors: list[str],
                       depth: int) -> None:
    """An error for each key the (closed) schema does not list, where the value's shape
    follows it unambiguously (``anyOf`` branches are left to pydantic)."""
    if depth > _MAX_WALK or not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        _unexpected_fields(value, defs.get(ref[8:]), defs, path, errors, depth + 1)
        return
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties = schema["properties"]
        for key, item in value.items():
            if key in properties:
                _unexpected_fields(item, properties[key], defs, join(path, key), errors, depth + 1)
            elif schema.get("additionalProperties") is False:
                fail(errors, join(path, key), f"unexpected field (the fields are: {', '.join(properties) or 'none'})")
    elif isinstance(value, list):
        prefix = schema.get("prefixItems")
        for i, item in enumerate(value):
            sub = prefix[i] if isinstance(prefix, list) and i < len(prefix) else schema.get("items")
            _unexpected_fields(item, sub, defs, join(path, i), errors, depth + 1)
