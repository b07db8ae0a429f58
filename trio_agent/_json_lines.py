"""Reading JSON back from files: one line (or one document) to a value, bounded.

Every loader of persisted data -- rollouts, the app server's thread records,
snapshots, cassettes -- parses through :func:`loads`, so every kind of damage
becomes one ``LineProblem`` (a ``ValueError``) saying what was wrong, which the
loader turns into its documented error (``InvalidSessionSnapshot``,
``CassetteError``) with the file and line. What it refuses:

- bytes that are not UTF-8, and text that is not JSON;
- ``NaN``/``Infinity`` (and numbers such as ``1e999`` that only fit as infinity):
  not JSON, and nothing may send them on (``_jsontext``);
- integers longer than Python's int-string limit (``sys.get_int_max_str_digits``);
- nesting deeper than ``MAX_DEPTH`` arrays and objects. Every consumer of the data
  walks it recursively (``json`` encoding, cattrs, copies), so a deep line would
  otherwise raise ``RecursionError`` wherever it is next touched -- or in the
  parser itself. Nothing this package writes nests more than a few levels (a
  tool's JSON schema in a session's metadata is the deepest), and the codex CLI's
  JSON reader (serde_json) refuses lines near this depth by default as well.

The depth check is iterative: the parser's own recursion is bounded by the
interpreter (its ``RecursionError`` is caught here), the check's by nothing.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_DEPTH", "LineProblem", "NotJson", "json_kind", "loads", "too_deep", "untyped"]

MAX_DEPTH = 128


class LineProblem(ValueError):
    """What is wrong with one line or document (the caller says where it is)."""


class NotJson(LineProblem):
    """The text is not JSON at all; ``detail`` is the parser's own words (where it stopped)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"it is not JSON ({detail})")
        self.detail = detail


def _no_constant(name: str) -> Any:
    raise LineProblem(f"it holds {name}, which is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise LineProblem(f"it holds the number {text[:40]}, too large for a float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)  # json.loads made one per call


def loads(data: str | bytes) -> Any:
    """``data`` as JSON (``LineProblem`` saying what was wrong); see the module docstring."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LineProblem(f"it is not UTF-8 (byte {exc.start} of the line)") from None
    try:
        value = _DECODER.decode(data)
    except LineProblem:
        raise
    except RecursionError:
        raise LineProblem(f"it nests arrays and objects deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise NotJson(exc.args[0]) from None
    except ValueError as exc:  # an integer beyond the int-string limit
        raise LineProblem(f"it holds a number Python cannot read ({str(exc)[:200]})") from None
    # Each level of nesting opens one ``{`` or ``[``: text with at most MAX_DEPTH of them
    # cannot nest deeper, and the walk (most of a short line's load) is skipped.
    if data.count("{") + data.count("[") > MAX_DEPTH and too_deep(value, MAX_DEPTH):
        raise LineProblem(f"it nests arrays and objects deeper than {MAX_DEPTH} levels")
    return value


def too_deep(value: object, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` arrays and objects (without recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


def json_kind(value: object) -> str:
    """``value``'s JSON type, for messages: "an object", "a string", "null"..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def untyped(line: object) -> str | None:
    """What keeps ``line`` from being a JSON object with a string ``type`` (the shape of
    every line of a rollout or thread record), or None."""
    if not isinstance(line, dict):
        return f"it is {json_kind(line)}, not a JSON object"
    kind = line.get("type")
    if not isinstance(kind, str):
        return f'its "type" is {json_kind(kind)}, not a string' if "type" in line else 'it has no "type"'
    return None
