"""JSON schemas and validators from Python annotations (pure; used by typed tools).

Theory of operation: each annotation becomes a ``_Node`` that knows its JSON schema,
whether that schema is valid in OpenAI's strict mode, and how to check and convert a
decoded JSON value (``convert``), collecting one message per bad field with its path
(``items[2].name: expected a string, got 3``). Objects (``TypedDict``, dataclasses,
attrs classes, a function's parameter list) are ``ObjectNode`` nodes with
``additionalProperties: false``; a schema is *strict* when every object lists all its
properties as required and no node is open-ended (``Any``, ``dict[str, T]``).
``Shape`` is the public face: a compiled annotation with ``schema`` and ``validate``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from .._errors import ConfigError
from ._schema_base import INVALID as _INVALID
from ._schema_base import JSON_NAMES as _JSON_NAMES
from ._schema_base import Node as _Node
from ._schema_base import describe_value, to_json_value
from ._schema_base import fail as _fail
from ._schema_base import join as _join
from ._schema_types import Constrained, RefNode, TupleNode, check_patterns, formatted_node, read_metadata

__all__ = [
    "Builder", "Field", "ObjectNode", "Shape", "annotated_doc", "describe_value", "raise_errors", "to_json_value",
]

_MAX_ERRORS = 8


class _Scalar(_Node):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.schema = {"type": kind}
        self.expected = _JSON_NAMES[kind]

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        kind = self.kind
        if kind == "string" and isinstance(value, str):
            return value
        if kind == "boolean" and isinstance(value, bool):
            return value
        if kind == "null" and value is None:
            return None
        if kind in ("integer", "number") and isinstance(value, int | float) and not isinstance(value, bool):
            if kind == "number":  # 1e400 decodes as inf, and 1 followed by 400 digits has no float
                number = float(value) if isinstance(value, float) or abs(value) < 2**1023 else math.inf
                return number if math.isfinite(number) else _fail(errors, path, "expected a finite number")
            if isinstance(value, int):
                return value
            if value.is_integer():
                return int(value)
        return _fail(errors, path, f"expected {self.expected}, got {describe_value(value)}")


class _AnyValue(_Node):
    strict = False
    expected = "any JSON value"

    def __init__(self) -> None:
        self.schema = {}

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        return value


class _Choice(_Node):
    """``Literal[...]`` or an ``Enum``: one of a fixed set of JSON scalars."""

    def __init__(self, values: Sequence[object], members: Mapping[object, object] | None = None) -> None:
        self.values = list(values)
        self.members = members
        kinds = {_json_kind(v) for v in self.values}
        self.schema = {"type": kinds.pop(), "enum": self.values} if len(kinds) == 1 else {"enum": self.values}
        self.expected = "one of " + ", ".join(describe_value(v) for v in self.values)

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        for allowed in self.values:
            if _same(value, allowed):
                return self.members[allowed] if self.members is not None else allowed
        return _fail(errors, path, f"expected {self.expected}, got {describe_value(value)}")


class _Array(_Node):
    def __init__(self, item: _Node, build: Callable[[list[object]], object] = list) -> None:
        self.item = item
        self.build = build
        self.schema = {"type": "array", "items": item.schema}
        self.strict = item.strict
        self.expected = "an array"

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        if not isinstance(value, list):
            return _fail(errors, path, f"expected an array, got {describe_value(value)}")
        items = [self.item.convert(v, _join(path, i), errors) for i, v in enumerate(value)]
        return _INVALID if any(v is _INVALID for v in items) else self.build(items)


class _Mapping(_Node):
    strict = False  # strict mode has no open-ended objects

    def __init__(self, value: _Node) -> None:
        self.value = value
        self.schema = {"type": "object", "additionalProperties": value.schema}
        self.expected = "an object"

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        if not isinstance(value, dict):
            return _fail(errors, path, f"expected an object, got {describe_value(value)}")
        out = {k: self.value.convert(v, _join(path, k), errors) for k, v in value.items()}
        return _INVALID if any(v is _INVALID for v in out.values()) else out


class _Union(_Node):
    def __init__(self, options: list[_Node]) -> None:
        self.options = options
        self.schema = {"anyOf": [o.schema for o in options]}
        self.strict = all(o.strict for o in options)
        self.expected = " or ".join(o.expected for o in options)

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        non_null = [o for o in self.options if o.schema != {"type": "null"}]
        if value is None and len(non_null) < len(self.options):
            return None
        if len(non_null) == 1:  # Optional[T]: T's own errors are the useful ones
            return non_null[0].convert(value, path, errors)
        for option in non_null:
            scratch: list[str] = []
            converted = option.convert(value, path, scratch)
            if converted is not _INVALID:
                return converted
        return _fail(errors, path, f"expected {self.expected}, got {describe_value(value)}")


@attrs.frozen
class Field:
    name: str  # the JSON property
    node: _Node
    required: bool
    description: str | None = None
    default: object = None
    target: str = ""  # the Python keyword it is passed as


class ObjectNode(_Node):
    def __init__(self, fields: list[Field], build: Callable[[dict[str, object]], object], title: str) -> None:
        self.fields = {f.name: f for f in fields}
        self.build = build
        self.title = title
        properties: dict[str, Any] = {}
        for f in fields:
            prop = dict(f.node.schema)
            if f.description:
                prop["description"] = f.description
            if not f.required and _is_json(f.default) and f.default is not None:
                prop["default"] = f.default
            properties[f.name] = prop
        self.schema = {
            "type": "object",
            "properties": properties,
            "required": [f.name for f in fields if f.required],
            "additionalProperties": False,
        }
        self.strict = all(f.required and f.node.strict for f in fields)
        self.expected = "an object"

    def convert(self, value: object, path: str, errors: list[str]) -> object:
        values = self.convert_fields(value, path, errors)
        if values is None:
            return _INVALID
        try:
            return self.build(values)
        except Exception as exc:  # a dataclass __post_init__ or attrs validator said no
            return _fail(errors, path, f"{type(exc).__name__}: {exc}")

    def convert_fields(self, value: object, path: str, errors: list[str]) -> dict[str, object] | None:
        if not isinstance(value, dict):
            _fail(errors, path, f"expected an object, got {describe_value(value)}")
            return None
        before = len(errors)
        out: dict[str, object] = {}
        for key in value:
            if key not in self.fields:
                known = ", ".join(self.fields) or "none"
                _fail(errors, _join(path, key), f"unexpected field (the fields are: {known})")
        for name, f in self.fields.items():
            if name not in value:
                if f.required:
                    _fail(errors, _join(path, name), "required field is missing")
                continue
            converted = f.node.convert(value[name], _join(path, name), errors)
            out[f.target or name] = converted
        return out if len(errors) == before else None


def _same(value: object, allowed: object) -> bool:
    """JSON equality: ``1 == 1.0`` but ``true != 1`` and ``"1" != 1``."""
    if isinstance(value, bool) or isinstance(allowed, bool):
        return type(value) is type(allowed) and value == allowed
    if isinstance(value, int | float) and isinstance(allowed, int | float):
        return value == allowed
    return type(value) is type(allowed) and value == allowed


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    return "string"


def _is_json(value: object) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


# -- annotations -> nodes --------------------------------------------------------------


def annotated_doc(hint: object) -> str | None:
    """The description of ``Annotated[T, "description"]`` (its first string metadata)
    or ``Annotated[T, pydantic.Field(description=...)]``."""
    if typing.get_origin(hint) in (typing.Required, typing.NotRequired):
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is typing.Annotated:
        return read_metadata(getattr(hint, "__metadata__", ()))[1]
    return None


class Builder:
    """Builds the nodes of one tool; ``defs`` collects the ``$defs`` its schemas refer
    to (recursive classes, pydantic models), to be put at the root of its schema."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._depth = 0
        self.defs: dict[str, Any] = {}
        self._classes: dict[type, _Node] = {}  # built (or being built: a RefNode) classes

    def node(self, hint: object) -> _Node:
        self._depth += 1
        try:
            if self._depth > 32:
                raise ConfigError(f"{self.owner}: type annotations nest too deeply (more than 32 levels)")
            return self._node(hint)
        finally:
            self._depth -= 1

    def rooted(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``schema`` with the ``$defs`` it needs (all of this tool's)."""
        return {**schema, "$defs": dict(self.defs)} if self.defs else schema

    def _pydantic(self, hint: object) -> _Node:
        from ._schema_pydantic import PydanticNode, pydantic_installed

        if not pydantic_installed():
            raise ConfigError(
                f"{self.owner}: the annotation {hint!r} has no JSON form here, and pydantic, which could describe "
                "it, is not installed; install pydantic (pip install 'trio-agent[mcp]' or pydantic) or use str, int, "
                "float, bool, Literal, an Enum, list[T], tuple[...], dict[str, T], T | None, datetime, date, UUID, "
                "Path, Decimal, a TypedDict, a dataclass or an attrs class"
            )
        return PydanticNode(hint, self.owner, self.defs)

    def _node(self, hint: object) -> _Node:
        if isinstance(hint, str | typing.ForwardRef):
            raise ConfigError(
                f"{self.owner}: the annotation {str(hint)!r} cannot be resolved; import the type it names"
            )
        if hint is None or hint is type(None):
            return _Scalar("null")
        for py_type, kind in ((bool, "boolean"), (str, "string"), (int, "integer"), (float, "number")):
            if hint is py_type:
                return _Scalar(kind)
        if hint is Any or hint is object:
            return _AnyValue()
        formatted = formatted_node(hint)
        if formatted is not None:
            return formatted
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Annotated:
            return self._annotated(hint, args[0])
        if origin in (typing.Required, typing.NotRequired):
            return self.node(args[0])
        if origin is typing.Literal:
            return _Choice(args)
        if origin is typing.Union or origin is types.UnionType:
            return _Union([self.node(a) for a in args])
        if origin in (list, Sequence, typing.Sequence) or (origin is tuple and len(args) == 2 and args[1] is ...):
            item = self.node(args[0]) if args else _AnyValue()
            return _Array(item, tuple if origin is tuple else list)
        if origin is tuple and args and args != ((),):
            return TupleNode([self.node(a) for a in args])
        if origin in (dict, Mapping, typing.Mapping):
            if args and args[0] is not str:
                raise ConfigError(f"{self.owner}: dict keys must be str (JSON object keys), not {args[0]!r}")
            return _Mapping(self.node(args[1]) if args else _AnyValue())
        if hint in (list, tuple):
            return _Array(_AnyValue())
        if hint is dict:
            return _Mapping(_AnyValue())
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            members = {m.value: m for m in hint}
            if not all(isinstance(v, str | int | float | bool) for v in members):
                raise ConfigError(f"{self.owner}: enum {hint.__name__} must have str or number values")
            return _Choice(list(members), members)
        from ._schema_pydantic import is_pydantic_class

        if is_pydantic_class(hint):
            return self._pydantic(hint)
        if isinstance(hint, type) and (typing.is_typeddict(hint) or dataclasses.is_dataclass(hint) or attrs.has(hint)):
            return self._recursive(hint)
        return self._pydantic(hint)  # a TypeAdapter type (set[int], timedelta, ...), or a clear ConfigError

    def _annotated(self, hint: object, inner_hint: object) -> _Node:
        constraints, _, understood = read_metadata(getattr(hint, "__metadata__", ()))
        if not understood:
            return self._pydantic(hint)  # a Predicate, strict=...: pydantic enforces it, nothing is dropped
        check_patterns(constraints, self.owner)
        inner = self.node(inner_hint)
        if not constraints:
            return inner
        if not Constrained.fits(inner, constraints):
            return self._pydantic(hint)
        return Constrained(inner, constraints)

    def _recursive(self, cls: type) -> _Node:
        """A class's node, built once; a class met again while it is being built is a
        ``$ref`` into ``defs``."""
        known = self._classes.get(cls)
        if isinstance(known, RefNode):
            known.used = True
            return known
        if known is not None:
            return known
        name, n = cls.__name__, 2
        while name in self.defs or any(isinstance(r, RefNode) and r.name == name for r in self._classes.values()):
            name, n = f"{cls.__name__}{n}", n + 1
        ref = RefNode(name)
        self._classes[cls] = ref
        try:
            node = self._class(cls)
        except BaseException:
            del self._classes[cls]
            raise
        if not ref.used:
            self._classes[cls] = node
            return node
        ref.target = node
        ref.strict = node.strict
        self.defs[name] = node.schema
        return ref

    def _class(self, cls: type) -> _Node:
        if typing.is_typeddict(cls):
            hints = typing.get_type_hints(cls, include_extras=True)
            fields = [Field(n, self.node(h), _required_key(cls, n, h), annotated_doc(h)) for n, h in hints.items()]
            return ObjectNode(fields, dict, cls.__name__)
        if dataclasses.is_dataclass(cls):
            hints = typing.get_type_hints(cls, include_extras=True)
            fields = []
            for f in dataclasses.fields(cls):
                if not f.init:
                    continue
                has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
                default = None if f.default is dataclasses.MISSING else f.default
                hint = hints[f.name]
                fields.append(Field(f.name, self.node(hint), not has_default, annotated_doc(hint), default))
            return ObjectNode(fields, lambda values: cls(**values), cls.__name__)
        if attrs.has(cls):
            hints = typing.get_type_hints(cls, include_extras=True)
            fields = []
            for a in attrs.fields(cls):
                if not a.init:
                    continue
                default = a.default if not isinstance(a.default, attrs.Factory) else None  # type: ignore[arg-type]
                required = a.default is attrs.NOTHING
                hint = hints.get(a.name, a.type)
                if hint is None:
                    raise ConfigError(f"{self.owner}: attribute {cls.__name__}.{a.name} has no type annotation")
                alias = a.alias or a.name
                fields.append(
                    Field(alias, self.node(hint), required, annotated_doc(hint), None if required else default)
                )
            return ObjectNode(fields, lambda values: cls(**values), cls.__name__)
        raise ConfigError(
            f"{self.owner}: the class {cls.__name__} has no JSON form; use a TypedDict, a dataclass or an attrs class"
        )


def _required_key(cls: type, name: str, hint: object) -> bool:
    # With postponed annotations ``__required_keys__`` cannot see ``NotRequired``
    # (Python 3.11), so the resolved hint decides, then the class's totality.
    origin = typing.get_origin(hint)
    if origin is typing.NotRequired:
        return False
    if origin is typing.Required:
        return True
    return name in getattr(cls, "__required_keys__", ()) if getattr(cls, "__total__", True) else False


# -- compiled shapes ---------------------------------------------------------------------


def raise_errors(errors: list[str]) -> typing.NoReturn:
    from ._tool_errors import InvalidToolArguments

    shown = errors[:_MAX_ERRORS]
    if len(errors) > _MAX_ERRORS:
        shown.append(f"... and {len(errors) - _MAX_ERRORS} more")
    raise InvalidToolArguments("; ".join(shown))


class Shape:
    """A compiled annotation: its JSON ``schema`` and ``validate(value)``, which returns
    the converted value or raises ``InvalidToolArguments`` naming each bad field."""

    def __init__(self, hint: object, owner: str) -> None:
        builder = Builder(owner)
        self._node = builder.node(hint)
        self.schema = builder.rooted(self._node.schema)
        self.strict = self._node.strict

    def validate(self, value: object) -> object:
        errors: list[str] = []
        converted = self._node.convert(value, "", errors)
        if converted is _INVALID:
            raise_errors(errors)
        return converted
