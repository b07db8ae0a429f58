"""Check a payload against its declared ``TypedDict`` at runtime.

The test suite runs every emitted event through ``payload_problems`` (see
``tests/conftest.py``), so a declaration that drifts from what the runtime emits fails
the tests that emit it. The checker understands exactly what the declarations use:
``str``/``int``/``float``/``bool``/``None``, ``Literal``, unions, ``list[X]``,
``dict[str, X]``, nested ``TypedDict``s, ``NotRequired`` and ``JsonValue``. Anything else
in a declaration is a ``TypeError`` (a declaration the check cannot vouch for).

Like the type checkers, it treats ``bool`` as distinct from ``int`` (JSON ``true`` is
not a count) and accepts an ``int`` where a ``float`` is declared. Undeclared keys are
problems too: a new field must be declared (and documented) before it is emitted.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator, Mapping
from typing import ForwardRef, Literal, NotRequired, Required, Union, cast, get_args, get_origin, is_typeddict

from .._events import EventKind
from . import EVENT_PAYLOADS
from ._shared import JsonValue

__all__ = ["check_declarations", "describe", "payload_problems", "typeddict_problems"]

_SHOWN = 120  # characters of a value a problem shows


def payload_problems(kind: EventKind, payload: object) -> list[str]:
    """Every way ``payload`` departs from ``kind``'s declaration (``[]`` when it conforms);
    each names the kind, the field and the value."""
    declared = EVENT_PAYLOADS.get(kind)
    if declared is None:
        return [f"{kind}: no payload is declared for this kind"]
    return [f"{kind}: {problem}" for problem in typeddict_problems(declared, payload)]


def typeddict_problems(declared: type, value: object, where: str = "") -> list[str]:
    """The problems of ``value`` as an instance of the ``TypedDict`` ``declared``."""
    fields = _as_dict(value)
    if fields is None:
        return [f"{_place(where)}{_shown(value)} is not an object ({declared.__name__})"]
    problems: list[str] = []
    hints: dict[str, object] = declared.__annotations__
    required: frozenset[str] = getattr(declared, "__required_keys__", frozenset())
    for missing in sorted(required - fields.keys()):
        problems.append(f"missing required field {where + missing!r}")
    for key, field in fields.items():
        name = str(key)
        if key not in hints:
            problems.append(f"undeclared field {where + name!r} = {_shown(field)}")
        else:
            problems.extend(_problems(hints[name], field, f"{where}{name}"))
    return problems


def _problems(annotation: object, value: object, where: str) -> list[str]:
    annotation = _unwrap(annotation)
    if annotation is JsonValue:
        return list(_non_json(value, where))
    if is_typeddict(annotation):
        assert isinstance(annotation, type)
        return typeddict_problems(annotation, value, f"{where}.")
    origin, args = get_origin(annotation), get_args(annotation)
    items, fields = _as_list(value), _as_dict(value)
    if origin is list and items is not None:
        return [p for i, item in enumerate(items) for p in _problems(args[0], item, f"{where}[{i}]")]
    if origin is dict and fields is not None:
        return [p for k, item in fields.items() for p in _problems(args[1], item, f"{where}[{k!r}]")]
    if origin in (Union, types.UnionType):
        arms = [_problems(arm, value, where) for arm in args]
        if any(not problems for problems in arms):
            return []
        deep = [problems for arm, problems in zip(args, arms, strict=True) if _container_fits(arm, value)]
        return deep[0] if len(deep) == 1 else [_mismatch(annotation, value, where)]
    return [] if _fits(annotation, value) else [_mismatch(annotation, value, where)]


def _fits(annotation: object, value: object) -> bool:
    """A leaf: a plain type, ``None`` or a ``Literal``."""
    if annotation is None or annotation is type(None):
        return value is None
    if get_origin(annotation) is Literal:
        return any(_is_choice(value, choice) for choice in get_args(annotation))
    if get_origin(annotation) in (list, dict):
        return False  # a container annotation whose value is not that container
    test = _LEAVES.get(annotation)
    if test is None:
        raise TypeError(f"the payload check does not understand the annotation {annotation!r}")
    return test(value)


def _container_fits(annotation: object, value: object) -> bool:
    """Whether ``value`` is the container ``annotation`` wants (so its inner problems are
    the ones worth reporting for a union)."""
    annotation = _unwrap(annotation)
    origin = get_origin(annotation)
    return (origin is list and isinstance(value, list)) or (
        (origin is dict or is_typeddict(annotation)) and isinstance(value, dict)
    )


def _is_choice(value: object, choice: object) -> bool:
    if isinstance(choice, bool) or isinstance(value, bool):
        return type(value) is type(choice) and value == choice  # True is not 1
    return isinstance(value, type(choice)) and value == choice


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_LEAVES: dict[object, Callable[[object], bool]] = {
    str: lambda value: isinstance(value, str),
    bool: lambda value: isinstance(value, bool),
    int: _is_int,
    float: lambda value: isinstance(value, float) or _is_int(value),
}


def _non_json(value: object, where: str) -> Iterator[str]:
    """What JSON cannot hold in ``value`` (strings, numbers, booleans, null, lists and
    string-keyed objects are JSON), one problem per place."""
    if value is None or isinstance(value, str | int | float):
        return
    items, fields = _as_list(value), _as_dict(value)
    if items is not None:
        for i, item in enumerate(items):
            yield from _non_json(item, f"{where}[{i}]")
    elif fields is not None:
        for key, item in fields.items():
            if isinstance(key, str):
                yield from _non_json(item, f"{where}[{key!r}]")
            else:
                yield f"field {where!r}: the key {_shown(key)} is not a string"
    else:
        yield f"field {where!r}: {_shown(value)} is not JSON"


def _as_list(value: object) -> list[object] | None:
    return cast("list[object]", value) if isinstance(value, list) else None


def _as_dict(value: object) -> dict[object, object] | None:
    return cast("dict[object, object]", value) if isinstance(value, dict) else None


def _unwrap(annotation: object) -> object:
    while get_origin(annotation) in (NotRequired, Required):
        annotation = get_args(annotation)[0]
    if isinstance(annotation, ForwardRef):
        annotation = annotation.__forward_arg__
    if annotation == "JsonValue":  # the alias's own recursive references
        return JsonValue
    return annotation


def describe(annotation: object) -> str:
    """An annotation as the declarations spell it (``str | None``, ``list[JsonValue]``)."""
    annotation = _unwrap(annotation)
    if annotation is JsonValue:
        return "JsonValue"
    if annotation is None or annotation is type(None):
        return "None"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin in (Union, types.UnionType):
        return " | ".join(describe(arm) for arm in args)
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(describe(a) for a in args)}]"
    name = getattr(annotation, "__name__", None)
    return name if isinstance(name, str) else repr(annotation)


def _mismatch(annotation: object, value: object, where: str) -> str:
    return f"field {where!r}: {_shown(value)} is not {describe(annotation)}"


def _place(where: str) -> str:
    return f"field {where.rstrip('.')!r}: " if where else ""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def check_declarations(kinds: Mapping[EventKind, type] = EVENT_PAYLOADS) -> None:
    """Raise ``TypeError`` when a declaration uses an annotation the check cannot read
    (called by the tests, once, on every declaration)."""
    for declared in kinds.values():
        _walk(declared)


def _walk(annotation: object) -> None:
    annotation = _unwrap(annotation)
    if annotation is JsonValue:
        return
    if is_typeddict(annotation):
        assert isinstance(annotation, type)
        for field in annotation.__annotations__.values():
            _walk(field)
        return
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (list, dict, Union, types.UnionType):
        if origin is dict and args[0] is not str:
            raise TypeError(f"payload objects have string keys, not {args[0]!r}")
        for arm in args:
            _walk(arm)
        return
    _fits(annotation, None)  # raises TypeError for an annotation it cannot read
