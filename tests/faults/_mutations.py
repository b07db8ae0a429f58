"""Hostile edits of JSON-lines files, for the persisted-record fault tests.

A file is a list of parsed lines; :func:`mutated` draws one to three edits (a value
swapped for another JSON value of any type, a key deleted, a value buried under
hundreds or thousands of arrays, a line replaced by raw bytes, the file cut at any
byte) and returns the file's new bytes. Deep nesting is written as text, so that
neither this module nor ``json.dumps`` recurses through it.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

__all__ = ["JSON_VALUES", "deep", "encode_lines", "mutated"]

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


class _Nested:
    """``value`` inside ``depth`` arrays, written as text by :func:`encode_lines`."""

    def __init__(self, value: Any, depth: int) -> None:
        self.value, self.depth = value, depth


def deep(depth: int, value: Any = 0) -> _Nested:
    return _Nested(value, depth)


def _encode(value: Any) -> str:
    holes: list[_Nested] = []

    def plug(item: Any) -> Any:
        if isinstance(item, _Nested):
            holes.append(item)
            return f"\x00hole{len(holes) - 1}\x00"
        if isinstance(item, dict):
            return {key: plug(child) for key, child in item.items()}
        if isinstance(item, list):
            return [plug(child) for child in item]
        return item

    text = json.dumps(plug(value), ensure_ascii=False)
    for index, hole in enumerate(holes):
        text = text.replace(json.dumps(f"\x00hole{index}\x00"), "[" * hole.depth + _encode(hole.value)
                            + "]" * hole.depth)
    return text


def encode_lines(lines: list[Any]) -> bytes:
    """Each line as JSON (raw ``bytes`` lines as they are), newline-terminated."""
    return b"".join((line if isinstance(line, bytes) else _encode(line).encode()) + b"\n" for line in lines)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (keys and indexes), the value itself first."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    return [_replace(child, rest, new) if index == head else child for index, child in enumerate(value)]


def _delete(value: Any, path: tuple[Any, ...]) -> Any:
    head, rest = path[0], path[1:]
    if not rest:
        return {k: v for k, v in value.items() if k != head} if isinstance(value, dict) else value
    if isinstance(value, dict):
        return {**value, head: _delete(value[head], rest)}
    return [_delete(child, rest) if index == head else child for index, child in enumerate(value)]


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def mutated(data: st.DataObject, lines: list[Any]) -> tuple[bytes, list[str]]:
    """The file after one to three drawn edits, and what they were (for the failure report)."""
    lines = list(lines)
    done: list[str] = []
    cut: int | None = None
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        number = data.draw(st.integers(0, len(lines) - 1), label="line")
        kind = data.draw(st.sampled_from(["swap", "delete", "nest", "raw", "cut"]), label="edit")
        line = lines[number]
        paths = _paths(line) if not isinstance(line, bytes) else [()]
        path = data.draw(st.sampled_from(paths), label="path")
        if kind == "swap" and not isinstance(line, bytes):
            lines[number] = _replace(line, path, data.draw(JSON_VALUES, label="value"))
        elif kind == "delete" and path and not isinstance(line, bytes) and isinstance(_get(line, path[:-1]), dict):
            lines[number] = _delete(line, path)
        elif kind == "nest" and not isinstance(line, bytes):
            depth = data.draw(st.sampled_from([129, 300, 1000, 5000]), label="depth")
            lines[number] = _replace(line, path, deep(depth, _get(line, path)))
        elif kind == "raw":
            lines[number] = data.draw(st.binary(max_size=24).filter(lambda b: b"\n" not in b), label="bytes")
        elif kind == "cut":
            cut = data.draw(st.integers(0, 4000), label="cut at")
        done.append(f"{kind} line {number + 1} at {path}")
    encoded = encode_lines(lines)
    return (encoded[:cut] if cut is not None else encoded), done
