"""Parsing of the `exec` tool input: optional first-line pragma, then JavaScript.

The input is raw JavaScript. Its first line may be a pragma (nanocodex
`parse_exec_source`, Codex `parse_exec_source`):

    // @exec: {"yield_time_ms": 10000, "max_output_tokens": 1000}

Only those two keys are accepted, each a non-negative safe integer (or null),
and the pragma must be followed by code. The pragma line is replaced by an
empty line so that line numbers in error stacks match the model's input.
"""

from __future__ import annotations

import json

import attrs

PRAGMA_PREFIX = "// @exec:"
MAX_SAFE_INTEGER = (1 << 53) - 1
_KEYS = ("yield_time_ms", "max_output_tokens")
_FIELDS_HINT = "supported fields `yield_time_ms` and `max_output_tokens`"


class ExecSourceError(ValueError):
    """The `exec` input is empty or its pragma is invalid; str(exc) is model-facing."""


@attrs.frozen
class ExecSource:
    """A parsed `exec` input."""

    code: str
    yield_time_ms: int | None = None
    max_output_tokens: int | None = None


def parse_exec_source(text: str) -> ExecSource:
    """Split `text` into pragma settings and code; raise `ExecSourceError` if invalid."""
    if not text.strip():
        raise ExecSourceError(
            "exec expects raw JavaScript source text (non-empty). Provide JS only, "
            'optionally with first-line `// @exec: {"yield_time_ms": 10000, '
            '"max_output_tokens": 1000}`.'
        )
    first_line, newline, rest = text.partition("\n")
    stripped = first_line.lstrip()
    if not stripped.startswith(PRAGMA_PREFIX):
        return ExecSource(code=text)
    if not rest.strip():
        raise ExecSourceError(
            "exec pragma must be followed by JavaScript source on subsequent lines"
        )
    settings = _parse_directive(stripped[len(PRAGMA_PREFIX) :].strip())
    return ExecSource(code=newline + rest, **settings)


def _parse_directive(directive: str) -> dict[str, int | None]:
    if not directive:
        raise ExecSourceError(f"exec pragma must be a JSON object with {_FIELDS_HINT}")
    try:
        value = json.loads(directive)
    except ValueError as exc:
        raise ExecSourceError(
            f"exec pragma must be valid JSON with {_FIELDS_HINT}: {exc}"
        ) from None
    if not isinstance(value, dict):
        raise ExecSourceError(f"exec pragma must be a JSON object with {_FIELDS_HINT}")
    for key in value:
        if key not in _KEYS:
            raise ExecSourceError(
                f"exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `{key}`"
            )
    settings: dict[str, int | None] = {}
    for key in _KEYS:
        field = value.get(key)
        if field is not None and not _is_safe_integer(field):
            raise ExecSourceError(
                f"exec pragma field `{key}` must be a non-negative safe integer"
            )
        settings[key] = field
    return settings


def _is_safe_integer(value: object) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and 0 <= value <= MAX_SAFE_INTEGER
    )
