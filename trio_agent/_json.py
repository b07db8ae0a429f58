"""The single cattrs converter of trio_agent.

It structures what is read back from JSON into attrs values: today a session snapshot
(``SessionSnapshot.from_json``). It is built when this module is first imported, and
nothing on the way to starting or running an agent imports it -- server frames are read
by hand (``_wire.frames``), events and snapshots are written by hand -- so neither
cattrs nor the converter cost ``import trio_agent`` anything
(``tests/test_lean_import.py`` holds that). Extra keys are tolerated.

Scalars are structured strictly: cattrs would otherwise coerce ``null`` into the
string ``"None"`` or ``"false"`` into ``True``; a wrongly typed field is an error, not
a value to guess at.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn

from ._event_payloads._shared import JsonValue

__all__ = ["converter"]

converter = cattrs.Converter(omit_if_default=False, forbid_extra_keys=False)


def _strict(kind: type) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _type: Any) -> Any:
        if type(value) is kind or (kind is float and type(value) is int):
            return value
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {value!r}")

    return structure


for _kind in (str, int, bool, float):
    converter.register_structure_hook(_kind, _strict(_kind))


def _attrs_from_mapping(cls: type) -> Callable[[Any, Any], Any]:
    inner: Callable[[Any, Any], Any] = make_dict_structure_fn(cls, converter)

    def structure(value: Any, _type: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected an object for {cls.__name__}, got {type(value).__name__}")
        return inner(value, cls)

    return structure


converter.register_structure_hook_factory(attrs.has, _attrs_from_mapping)


def _json_value(value: Any, _type: Any) -> Any:
    return value  # already decoded JSON: kept as it is (like ``Any`` before it was typed)


def _is_json_value(kind: Any) -> bool:
    """``JsonValue`` as an annotation resolves to a new ``Union`` object (its forward
    references evaluated), so it is recognised by its members, not by identity."""
    if kind is JsonValue:
        return True
    members = typing.get_args(kind) if typing.get_origin(kind) is typing.Union else ()
    return {str, int, float, bool, type(None)} <= set(members) and len(members) == 7


converter.register_structure_hook_func(_is_json_value, _json_value)
converter.register_unstructure_hook_func(_is_json_value, lambda value: value)
