"""``OutputSchema``: structured output for one turn (pure).

The Responses API constrains a response's text with ``text.format`` =
``{"type": "json_schema", "name": ..., "schema": ..., "strict": ...}``. A turn
given an output schema (``agent.prompt(text, output_schema=...)``, ``turn/start``'s
``outputSchema``) sends that format with each of its generation requests, and
only those: the warmup, compaction requests and other turns send none. The model's
final message is then the JSON text itself (``TurnResult.final_message``, as
``codex exec`` prints it); parsing it is the caller's choice (``json.loads``), so a
server that answers something else fails nothing that was committed.

The schema is checked here, before anything is sent, as far as a clear error needs:
plain JSON data, an object at the root (``"type": "object"``: what Structured
Outputs accepts at the root), and a ``name`` the API takes. Whether the rest is a
schema the API supports (strict mode wants ``additionalProperties: false`` and every
property ``required``) is the API's to say: its error fails the turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, final

import attrs

from .._errors import ConfigError

if TYPE_CHECKING:
    from .._event_payloads._shared import JsonValue

__all__ = ["DEFAULT_SCHEMA_NAME", "OutputSchema", "OutputSchemaLike", "output_schema_of"]

#: The format name codex sends (``codex_output_schema``): a server that keys on it sees
#: what it would see from codex.
DEFAULT_SCHEMA_NAME = "codex_output_schema"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_SCHEMA_BYTES = 1 << 20


def _plain_copy(schema: object) -> dict[str, JsonValue]:
    if not isinstance(schema, Mapping):
        raise ConfigError(
            f"an output schema must be a JSON Schema object (a dict) such as "
            f'{{"type": "object", "properties": {{...}}}}, got {type(schema).__name__}'
        )
    try:
        text = json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigError(
            "an output schema must be plain JSON data (dicts with string keys, lists, strings, finite numbers, "
            f"booleans, null); it cannot be encoded: {exc}"
        ) from None
    if len(text) > _MAX_SCHEMA_BYTES:
        raise ConfigError(f"an output schema must be at most {_MAX_SCHEMA_BYTES >> 20} MiB of JSON; "
                          f"this one is {len(text)} bytes")
    copy: dict[str, JsonValue] = json.loads(text)
    if copy.get("type") != "object":
        shown = json.dumps(copy.get("type")) if "type" in copy else "no type"
        raise ConfigError(
            f'an output schema\'s root must be an object schema ("type": "object"), got {shown}; '
            "wrap another value in an object property, e.g. "
            '{"type": "object", "properties": {"answer": ...}, "required": ["answer"]}'
        )
    return copy


@final
@attrs.frozen
class OutputSchema:
    """A JSON Schema the turn's final message must follow (Structured Outputs).

    ``schema`` is a JSON Schema whose root is ``{"type": "object", ...}`` (a private
    copy is kept); ``name`` is the format's name (1-64 letters, digits, ``_`` or ``-``;
    by default the one codex sends); ``strict`` asks the API to enforce the schema
    exactly (its strict mode: every object needs ``additionalProperties: false`` and
    all its properties ``required``). Equal when schema, name and strict are.
    Raises ``ConfigError`` saying what is wrong with any of them.
    """

    schema: dict[str, JsonValue] = attrs.field(converter=_plain_copy, eq=False)
    name: str = DEFAULT_SCHEMA_NAME
    strict: bool = True
    _text: str = attrs.field(init=False, repr=False)  # the canonical JSON of ``schema``: equality and hashing

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigError(f"an output schema's name must be 1-64 letters, digits, '_' or '-', got {self.name!r}")
        if not isinstance(self.strict, bool):
            raise ConfigError(f"an output schema's strict must be True or False, got {self.strict!r}")
        object.__setattr__(self, "_text", json.dumps(self.schema, sort_keys=True, separators=(",", ":")))

    def text_format(self) -> dict[str, JsonValue]:
        """The request's ``text.format`` (a fresh dict; the schema is shared, never mutated)."""
        return {"type": "json_schema", "name": self.name, "schema": self.schema, "strict": self.strict}


#: What ``prompt(output_schema=...)`` takes: an ``OutputSchema``, or the schema itself.
OutputSchemaLike = OutputSchema | Mapping[str, object]


def output_schema_of(value: OutputSchemaLike | None) -> OutputSchema | None:
    """``value`` as an ``OutputSchema``: a mapping is the schema (default name and
    strictness); None is none."""
    if value is None or isinstance(value, OutputSchema):
        return value
    return OutputSchema(value)  # the converter says what is wrong with anything but a mapping
