"""Whether a tool's parameters schema may be sent with ``strict: true``.

OpenAI's strict function tools (Structured Outputs) take a subset of JSON Schema: every
object closed (``additionalProperties: false``) with all of its properties required;
``anyOf``, ``enum``, ``const``, local ``$ref`` into ``$defs`` (recursion included);
strings with ``pattern`` and the formats ``date-time``, ``time``, ``date``,
``duration``, ``email``, ``hostname``, ``ipv4``, ``ipv6`` and ``uuid``; numbers with
``minimum``, ``maximum``, their exclusive forms and ``multipleOf``; arrays with
``items``, ``minItems`` and ``maxItems``. Anything else (``prefixItems``,
``minLength``, ``default``, an open object, an unknown format) makes the request fail,
so such a tool is sent with ``strict: false`` and its arguments are checked here instead.
A ``$ref`` must stand alone in strict mode (openai-agents inlines such refs for the same
reason), so ``lone_refs`` moves one with siblings (a description, a default) into a
one-branch ``anyOf``.
"""

from __future__ import annotations

__all__ = ["lone_refs", "strict_compatible"]

_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const", "description",
    "title", "$ref", "$defs", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minItems", "maxItems",
})
_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_MAX_DEPTH = 64


def strict_compatible(schema: object) -> bool:
    """True when ``schema`` (a tool's parameters: an object) is in the strict subset."""
    return isinstance(schema, dict) and schema.get("type") == "object" and _ok(schema, 0)


def lone_refs(schema: object) -> object:
    """A copy of ``schema`` where each ``{"$ref": ..., "description": ...}`` is
    ``{"anyOf": [{"$ref": ...}], "description": ...}`` (the same meaning)."""
    if isinstance(schema, list):
        return [lone_refs(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: lone_refs(v) if k not in ("enum", "const", "default") else v for k, v in schema.items()}
    if isinstance(out.get("$ref"), str) and len(out) > 1 and "anyOf" not in out:
        out["anyOf"] = [{"$ref": out.pop("$ref")}]
    return out


def _ok(node: object, depth: int) -> bool:
    if depth > _MAX_DEPTH or not isinstance(node, dict) or not set(node) <= _KEYWORDS:
        return False
    if "format" in node and node["format"] not in _FORMATS:
        return False
    ref = node.get("$ref")
    if ref is not None and not (isinstance(ref, str) and ref.startswith("#") and len(node) == 1):
        return False  # a $ref with siblings is refused in strict mode
    if not any(k in node for k in ("type", "anyOf", "$ref", "enum", "const")):
        return False  # an open-ended value (``Any``)
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" in kinds:
        properties = node.get("properties", {})
        if node.get("additionalProperties") is not False or not isinstance(properties, dict):
            return False
        if sorted(node.get("required", [])) != sorted(properties):
            return False
        if not all(_ok(p, depth + 1) for p in properties.values()):
            return False
    if "array" in kinds and not _ok(node.get("items"), depth + 1):
        return False
    any_of = node.get("anyOf")
    if any_of is not None and not (isinstance(any_of, list) and all(_ok(o, depth + 1) for o in any_of)):
        return False
    defs = node.get("$defs", {})
    return isinstance(defs, dict) and all(_ok(d, depth + 1) for d in defs.values())
