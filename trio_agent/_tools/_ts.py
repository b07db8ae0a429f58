"""TypeScript-style declarations of tool schemas, for the ``exec`` description.

The model calls every nested tool from JavaScript, so it reads each tool's JSON
schema as a TypeScript type (as nanocodex does, ``reference/nanocodex.md`` 5.1):
``{ cmd: string; login?: boolean }``. The rendering is deliberately forgiving: a
keyword it does not know is ignored, local ``$ref``s are followed a few levels
deep, and anything it cannot say (or that grows too long) becomes ``unknown`` /
``object`` rather than a wrong type.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping

__all__ = ["declaration", "js_identifier", "ts_type"]

_MAX_DEPTH = 6
_MAX_LENGTH = 4000


def js_identifier(name: str) -> str:
    """Every character outside ``[A-Za-z0-9_$]`` becomes ``_`` (nanocodex 5.1)."""
    return re.sub(r"[^A-Za-z0-9_$]", "_", name)


@functools.cache
def _identifier() -> re.Pattern[str]:
    return re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")  # compiled on first use (see _jsontext)


def _key(name: str) -> str:
    return name if _identifier().match(name) else json.dumps(name)


def _comment(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        return ""
    flat = " ".join(text.split()).replace("*/", "* /")
    return f"/** {flat[:300]} */ "


class _Renderer:
    def __init__(self, root: Mapping[str, object]) -> None:
        self.root = root

    def render(self, schema: object, depth: int, top: bool = False) -> str:
        if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
            return "unknown"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self.render(self._resolve(ref), depth + 1)
        if "const" in schema:
            return json.dumps(schema["const"], ensure_ascii=False)
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return " | ".join(json.dumps(v, ensure_ascii=False) for v in enum)
        for combinator in ("anyOf", "oneOf"):
            options = schema.get(combinator)
            if isinstance(options, list) and options:
                return _union(self.render(o, depth + 1) for o in options)
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            return " & ".join(self.render(o, depth + 1) for o in all_of)
        kind = schema.get("type")
        if isinstance(kind, list):
            return _union(self.render({**schema, "type": k}, depth) for k in kind)
        return self._typed(schema, kind, depth, top)

    def _typed(self, schema: Mapping[str, object], kind: object, depth: int, top: bool) -> str:
        if kind == "string":
            return "string"
        if kind in ("integer", "number"):
            return "number"
        if kind == "boolean":
            return "boolean"
        if kind == "null":
            return "null"
        if kind == "array":
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list) and prefix and schema.get("items") is False:  # a tuple
                return "[" + ", ".join(self.render(p, depth + 1) for p in prefix) + "]"
            items = schema.get("items")
            inner = self.render(items, depth + 1) if items is not None else "unknown"
            return f"Array<{inner}>" if " " in inner else f"{inner}[]"
        if kind == "object" or "properties" in schema:
            return self._object(schema, depth, top)
        return "unknown"

    def _object(self, schema: Mapping[str, object], depth: int, top: bool) -> str:
        properties = schema.get("properties")
        required = schema.get("required")
        needed = set(required) if isinstance(required, list) else set()
        parts = []
        if isinstance(properties, Mapping):
            for name, prop in properties.items():
                mark = "" if name in needed else "?"
                doc = _comment(prop.get("description")) if top and isinstance(prop, Mapping) else ""
                parts.append(f"{doc}{_key(str(name))}{mark}: {self.render(prop, depth + 1)}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and extra:
            parts.append(f"[key: string]: {self.render(extra, depth + 1)}")
        elif not parts and extra is not False:
            return "{ [key: string]: unknown }"
        if not parts:
            return "{}"
        return "{ " + "; ".join(parts) + " }"

    def _resolve(self, ref: str) -> object:
        if not ref.startswith("#/"):
            return {}
        node: object = self.root
        for part in ref[2:].split("/"):
            if not isinstance(node, Mapping):
                return {}
            node = node.get(part.replace("~1", "/").replace("~0", "~"), {})
        return node


def _union(options: Iterable[str]) -> str:
    seen: list[str] = []
    for option in options:
        if option not in seen:
            seen.append(option)
    return " | ".join(seen)


def ts_type(schema: Mapping[str, object] | None, *, top: bool = False, fallback: str = "unknown") -> str:
    """``schema`` as a TypeScript type (``fallback`` when there is none or it is too long).
    ``top`` adds each property's description as a ``/** ... */`` comment."""
    if schema is None:
        return fallback
    text = _Renderer(schema).render(schema, 0, top)
    if len(text) > _MAX_LENGTH:
        text = _Renderer(schema).render(schema, 0, False)
    return text if len(text) <= _MAX_LENGTH else fallback


def declaration(name: str, input_type: str, output_type: str = "unknown", *, freeform: bool = False) -> str:
    """``declare const tools: { name(args: T): Promise<U>; }``."""
    parameter = "input: string" if freeform else f"args: {input_type}"
    return f"declare const tools: {{ {js_identifier(name)}({parameter}): Promise<{output_type}>; }}"
