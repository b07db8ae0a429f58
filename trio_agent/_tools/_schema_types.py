"""The richer node kinds of typed tools: standard-library values sent as strings
(``datetime``, ``date``, ``time``, ``UUID``, ``Path``, ``Decimal``), fixed-length tuples
(``prefixItems``), ``Annotated`` constraints (``annotated-types`` and pydantic
``Field``), and references to recursive classes (``$defs``/``$ref``).

Constraints are read by duck typing (the attribute names ``annotated-types`` defines:
``gt``, ``ge``, ``lt``, ``le``, ``multiple_of``, ``min_length``, ``max_length``, and
pydantic's ``pattern``), so neither package is imported here. Each constraint is both
written into the schema (``minimum``, ``maxLength``, ...) and checked on the model's
value, with a message that names the bound (``n: must be <= 10, got 99``). Metadata
from those packages that is not understood here (a ``Predicate``, ``strict``, ...) is
reported to the caller, which hands the whole annotation to pydantic rather than
dropping it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import uuid
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from pathlib import Path, PurePath
from typing import Any

from .._errors import ConfigError
from ._schema_base import INVALID, Node, describe_value, fail, join

__all__ = ["Constrained", "Formatted", "RefNode", "TupleNode", "check_patterns", "formatted_node", "read_metadata"]

MAX_NESTING = 64  # levels of a recursive structure the model may send


class Formatted(Node):
    """A string the model sends for a Python value: ``datetime`` as ``date-time``, ..."""

    def __init__(self, schema: dict[str, Any], parse: Callable[[str], object], expected: str) -> None:
        self.schema = schema
        self.parse = parse
        self.expected = expected

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        if isinstance(value, str):
            try:
                return self.parse(value)
            except (ValueError, ArithmeticError):
                pass
        return fail(errors, path, f"expected {self.expected}, got {describe_value(value)}")


def _decimal(text: str) -> Decimal:
    value = Decimal(text.strip())
    if not value.is_finite():
        raise ValueError("not a finite number")
    return value


_DECIMAL_PATTERN = r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$"


def formatted_node(hint: object) -> Node | None:
    """The node of a standard-library type sent as a string, or None."""
    if hint is dt.datetime:
        return Formatted({"type": "string", "format": "date-time"}, dt.datetime.fromisoformat,
                         "an ISO 8601 date-time string")
    if hint is dt.date:
        return Formatted({"type": "string", "format": "date"}, dt.date.fromisoformat, "an ISO 8601 date string")
    if hint is dt.time:
        return Formatted({"type": "string", "format": "time"}, dt.time.fromisoformat, "an ISO 8601 time string")
    if hint is uuid.UUID:
        return Formatted({"type": "string", "format": "uuid"}, uuid.UUID, "a UUID string")
    if hint in (Path, PurePath):
        return Formatted({"type": "string"}, Path, "a path string")
    if hint is Decimal:
        return _DecimalNode()
    return None


class _DecimalNode(Formatted):
    """A decimal number as a string (exact), or a JSON number through its shortest text."""

    def __init__(self) -> None:
        super().__init__({"type": "string", "pattern": _DECIMAL_PATTERN}, _decimal, "a decimal number string")

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = repr(value)
        try:
            return super().convert(value, path, errors)
        except InvalidOperation:  # pragma: no cover -- Decimal raises it as an ArithmeticError
            return fail(errors, path, f"expected {self.expected}, got {describe_value(value)}")


class TupleNode(Node):
    """``tuple[A, B]``: an array of exactly these items (``prefixItems``)."""

    def __init__(self, items: list[Node]) -> None:
        self.items = items
        n = len(items)
        self.schema = {"type": "array", "prefixItems": [i.schema for i in items], "items": False,
                       "minItems": n, "maxItems": n}
        self.strict = False  # strict mode has no prefixItems
        self.expected = f"an array of {n} items"

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        if not isinstance(value, list) or len(value) != len(self.items):
            return fail(errors, path, f"expected {self.expected}, got {describe_value(value)}")
        pairs = enumerate(zip(self.items, value, strict=True))
        out = [node.convert(v, join(path, i), errors) for i, (node, v) in pairs]
        return INVALID if any(v is INVALID for v in out) else tuple(out)


class RefNode(Node):
    """A class that refers to itself: ``{"$ref": "#/$defs/<name>"}``, converted by the
    class's own node (set once it is built), at most ``MAX_NESTING`` levels deep."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.schema = {"$ref": f"#/$defs/{name}"}
        self.target: Node | None = None
        self.used = False
        self._depth = 0
        self.expected = "an object"

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        assert self.target is not None
        if self._depth >= MAX_NESTING:
            where = path if len(path) <= 80 else f"{path[:38]}...{path[-38:]}"
            return fail(errors, where, f"nests too deeply (at most {MAX_NESTING} levels)")
        self._depth += 1
        try:
            return self.target.convert(value, path, errors)
        finally:
            self._depth -= 1


# -- constraints --------------------------------------------------------------------------

# attribute: (schema keyword, holds(value, bound), text of the bound)
_NUMERIC: dict[str, tuple[str, Callable[[Any, Any], bool], str]] = {
    "gt": ("exclusiveMinimum", lambda v, b: v > b, "> {}"),
    "ge": ("minimum", lambda v, b: v >= b, ">= {}"),
    "lt": ("exclusiveMaximum", lambda v, b: v < b, "< {}"),
    "le": ("maximum", lambda v, b: v <= b, "<= {}"),
    "multiple_of": ("multipleOf", lambda v, b: v % b == 0, "a multiple of {}"),
}
_LENGTH: dict[str, tuple[str, Callable[[int, Any], bool]]] = {
    "min_length": ("at least", lambda n, b: n >= b), "max_length": ("at most", lambda n, b: n <= b),
}
_LENGTH_KEYWORDS = {"string": ("minLength", "maxLength", "characters"), "array": ("minItems", "maxItems", "items"),
                    "object": ("minProperties", "maxProperties", "fields")}
_KNOWN = {*_NUMERIC, *_LENGTH, "pattern"}


def _is_constraint_package(meta: object) -> bool:
    module = type(meta).__module__ or ""
    return module.split(".")[0] in ("annotated_types", "pydantic")


def _attributes(meta: object) -> dict[str, object]:
    if dataclasses.is_dataclass(meta):
        return {f.name: getattr(meta, f.name) for f in dataclasses.fields(meta)}
    return dict(getattr(meta, "__dict__", {}))


def read_metadata(metadata: Iterable[object]) -> tuple[list[tuple[str, object]], str | None, bool]:
    """The constraints (attribute, bound), the description and whether everything from
    ``annotated-types``/pydantic was understood, of an ``Annotated`` hint's metadata."""
    constraints: list[tuple[str, object]] = []
    description: str | None = None
    understood = True
    for meta in metadata:
        if isinstance(meta, str):
            description = description or meta
        elif not _is_constraint_package(meta):
            continue  # a marker of the user's own: not ours to judge (as before)
        elif type(meta).__name__ == "FieldInfo":
            inner, text, ok = read_metadata(getattr(meta, "metadata", ()))
            constraints += inner
            description = getattr(meta, "description", None) or text or description
            understood = understood and ok
        elif isinstance(meta, Iterable):  # GroupedMetadata: Interval, Len
            inner, _, ok = read_metadata(meta)
            constraints += inner
            understood = understood and ok
        else:
            attributes = {k: v for k, v in _attributes(meta).items() if v is not None}
            if not attributes or not set(attributes) <= _KNOWN:
                understood = False
            constraints += [(k, v) for k, v in attributes.items() if k in _KNOWN]
    return constraints, description, understood


def check_patterns(constraints: list[tuple[str, object]], owner: str) -> None:
    """A ``pattern`` that is not a regular expression is the tool's mistake: say so now."""
    for attribute, bound in constraints:
        if attribute == "pattern":
            try:
                re.compile(str(bound))
            except re.error as exc:
                raise ConfigError(f"{owner}: the pattern {bound!r} is not a regular expression ({exc})") from None


class Constrained(Node):
    """A node with bounds: ``Annotated[int, Ge(1), Le(10)]``, ``Annotated[str, MinLen(3)]``."""

    def __init__(self, inner: Node, constraints: list[tuple[str, object]]) -> None:
        self.inner = inner
        self.constraints = constraints
        self.expected = inner.expected
        self.schema = dict(inner.schema)
        self.strict = inner.strict
        kind = inner.schema.get("type")
        for attribute, bound in constraints:
            if attribute in _NUMERIC:
                self.schema[_NUMERIC[attribute][0]] = bound
            elif attribute == "pattern":
                self.schema["pattern"] = bound
            else:
                low, high, _ = _LENGTH_KEYWORDS[str(kind)]
                self.schema[low if attribute == "min_length" else high] = bound
                self.strict = self.strict and kind == "array"  # strict mode has minItems, not minLength

    @staticmethod
    def fits(inner: Node, constraints: list[tuple[str, object]]) -> bool:
        """Whether every constraint applies to ``inner``'s JSON type (else pydantic decides)."""
        kind = inner.schema.get("type")
        if isinstance(inner, Formatted):
            return False
        for attribute, bound in constraints:
            if attribute in _NUMERIC:
                ok = kind in ("integer", "number") and isinstance(bound, int | float) and not isinstance(bound, bool)
            elif attribute == "pattern":
                ok = kind == "string" and isinstance(bound, str)
            else:
                ok = kind in _LENGTH_KEYWORDS and isinstance(bound, int) and not isinstance(bound, bool)
            if not ok:
                return False
        return True

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        converted = self.inner.convert(value, path, errors)
        if converted is INVALID:
            return INVALID
        for attribute, bound in self.constraints:
            if attribute in _NUMERIC:
                _, holds, text = _NUMERIC[attribute]
                if not holds(converted, bound):
                    return fail(errors, path, f"must be {text.format(bound)}, got {describe_value(value)}")
            elif attribute == "pattern":
                assert isinstance(converted, str) and isinstance(bound, str)
                if re.search(bound, converted) is None:
                    return fail(errors, path, f"must match the pattern {bound!r}, got {describe_value(value)}")
            else:
                words, holds = _LENGTH[attribute]
                unit = _LENGTH_KEYWORDS[str(self.inner.schema.get("type"))][2]
                size = len(converted)  # type: ignore[arg-type]
                if not holds(size, bound):
                    return fail(errors, path, f"must have {words} {bound} {unit}, got {size}")
        return converted
