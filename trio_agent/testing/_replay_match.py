"""Matching a replayed request against the recorded one, and the diff when they differ.

Theory of operation: two runs of the same session never send byte-identical
requests. Client item ids are fresh UUIDs, the environment context names today's
date and the machine's shell and time zone, and the workspace may live elsewhere.
So both sides are *normalised* before they are compared:

- **Ids** are bound, not erased: walking the recorded and the replayed request side
  by side, the first time an id field (``id``, ``call_id``, ``previous_response_id``,
  ``response_id``, ``item_id``, ``session_id``, ``prompt_cache_key``) holds a
  recorded value at a position where the replay holds its own, the two are bound
  for the rest of the session, and the replayed value is shown as the recorded one.
  An id that later turns up bound to something else is left as it is, so the diff
  shows it: ids must correspond consistently, in both directions.
- **Secrets**: every credential the replaying agent sends (its request headers) and
  the environment's credential variables become ``<redacted>`` on both sides, as the
  recorder wrote them (``_cassette/redaction.py``): a diff never shows a secret.
- **Text**: the recorded workspace path and the replay's become ``<workspace>``;
  ``<current_date>``, ``<timezone>`` and ``<shell>`` of the environment context, and
  measured durations in tool outputs (``Wall time 0.5 seconds``, ``Wall time: 0.012
  seconds``, ``"wall_time_seconds": 0.451``), become ``*``.
- **Projection** (``ReplayMatch.INPUT``, the default): a ``response.create`` (or an
  HTTPS body) is compared on ``type``, ``generate``, ``previous_response_id`` and
  ``input``; other frames (``response.interrupt``) whole. ``ReplayMatch.BODY``
  compares the whole body.

A difference raises ``ReplayMismatch`` with a unified diff of the two normalised
requests, pretty-printed JSON with sorted keys.
"""

from __future__ import annotations

import difflib
import enum
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._cassette.redaction import SecretValues
from .._errors import AgentError

__all__ = ["Matcher", "ReplayMatch", "ReplayMismatch", "RequestMatcher", "pretty"]

ID_KEYS = frozenset({"id", "call_id", "previous_response_id", "response_id", "item_id", "session_id",
                     "prompt_cache_key"})
_INPUT_KEYS = ("type", "generate", "previous_response_id", "input")
_CONTEXT = re.compile(r"<(current_date|timezone|shell)>[^<]*</\1>")
# Measured durations in tool outputs: exec's "Wall time 0.5 seconds", "Wall time: 0.012 seconds"
# (aborts, clock.sleep) and exec_command's "wall_time_seconds": 0.451.
_WALL_TIME = re.compile(r"(Wall time:? )\d+(?:\.\d+)?( seconds)")
_WALL_SECONDS = re.compile(r'("wall_time_seconds\\?": ?)\d+(?:\.\d+)?')
WORKSPACE = "<workspace>"
RECORD_AGAIN = ("If the change is intended, record the session again (trio-agent run --record FILE, or "
                "AgentConfig(record=...)).")


class ReplayMatch(enum.Enum):
    """What must be equal between a recorded and a replayed request."""

    INPUT = "input"  # type, generate, previous_response_id and the input items
    BODY = "body"  # the whole body


class RequestMatcher(Protocol):
    """A custom matcher: called with the recorded and the replayed request (whole bodies
    or frames, normalised: ids bound, paths, dates and secrets replaced), True when they
    match. Pass one -- or a sequence, all of which must agree -- as ``match=``; any
    function of two dicts returning a bool is one."""

    def __call__(self, recorded: dict[str, Any], replayed: dict[str, Any], /) -> bool: ...


class ReplayMismatch(AgentError, AssertionError):
    """The agent did not behave as recorded: a request that differs, a connection or
    request the cassette does not have (or lacks), or a turn that ended differently.
    ``line`` is the cassette line concerned (None when there is none), ``diff`` the
    unified diff (recorded ``-``, replayed ``+``) or ``""``."""

    def __init__(self, message: str, *, line: int | None = None, diff: str = "") -> None:
        text = f"{message}\n{diff}" if diff else message
        super().__init__(f"{text}\n{RECORD_AGAIN}")
        self.headline = message
        self.line = line
        self.diff = diff


def pretty(value: object) -> list[str]:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def unified_diff(expected: object, actual: object) -> str:
    lines = difflib.unified_diff(pretty(expected), pretty(actual), "recorded", "replayed", lineterm="", n=3)
    return "\n".join(lines)


class Matcher:
    """Compares requests of one replay (the id bindings live as long as it does)."""

    def __init__(self, mode: ReplayMatch | RequestMatcher | Sequence[RequestMatcher], *,
                 recorded_workspace: str, workspace: str, secrets: SecretValues | None = None) -> None:
        self._custom: tuple[RequestMatcher, ...] = ()
        if isinstance(mode, ReplayMatch):
            self._mode = mode
        else:
            self._mode = ReplayMatch.BODY
            self._custom = (mode,) if callable(mode) else tuple(mode)
        self.secrets = secrets if secrets is not None else SecretValues()
        self._recorded_text = _text_normaliser(recorded_workspace, self.secrets)
        self._replayed_text = _text_normaliser(workspace, self.secrets)
        self._forward: dict[str, str] = {}  # replayed id -> recorded id
        self._backward: dict[str, str] = {}  # recorded id -> replayed id

    def check(self, expected: dict[str, Any], actual: dict[str, Any], *, what: str, line: int) -> None:
        """Raise ``ReplayMismatch`` unless ``actual`` matches ``expected``."""
        recorded = _walk(self._project(expected), self._recorded_text)
        replayed: Any = self._translate(recorded, _walk(self._project(actual), self._replayed_text))
        failed = [m for m in self._custom if not m(recorded, replayed)]
        if (failed if self._custom else recorded != replayed):
            by = f" by {', '.join(getattr(m, '__name__', repr(m)) for m in failed)}" if failed else ""
            raise ReplayMismatch(
                f"replay mismatch at cassette line {line}: {what} differs from the recording{by} "
                "(- recorded, + replayed; ids, workspace paths and the date normalised)",
                line=line, diff=unified_diff(recorded, replayed),
            )

    def redact(self, value: object) -> Any:
        """``value`` with every known credential replaced by ``<redacted>`` (as the cassette)."""
        return _walk(value, self.secrets.scrub)

    def _project(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._mode is ReplayMatch.BODY or body.get("type", "response.create") != "response.create":
            return body
        return {key: body[key] for key in _INPUT_KEYS if key in body}

    def _translate(self, expected: object, actual: object) -> object:
        if isinstance(actual, dict):
            other = expected if isinstance(expected, dict) else {}
            return {
                key: self._bind(other.get(key), value) if key in ID_KEYS and isinstance(value, str)
                else self._translate(other.get(key), value)
                for key, value in actual.items()
            }
        if isinstance(actual, list):
            others = expected if isinstance(expected, list) else []
            return [self._translate(others[i] if i < len(others) else None, v) for i, v in enumerate(actual)]
        return actual

    def _bind(self, expected: object, actual: str) -> str:
        if actual in self._forward:
            return self._forward[actual]
        if isinstance(expected, str) and expected not in self._backward:
            self._forward[actual] = expected
            self._backward[expected] = actual
            return expected
        return actual


def _text_normaliser(workspace: str, secrets: SecretValues) -> Callable[[str], str]:
    def normalise(text: str) -> str:
        text = secrets.scrub(text)
        if workspace and workspace in text:
            text = text.replace(workspace, WORKSPACE)
        if "</" in text:
            text = _CONTEXT.sub(lambda m: f"<{m.group(1)}>*</{m.group(1)}>", text)
        if "all time" in text:
            text = _WALL_TIME.sub(r"\1*\2", text)
        if "wall_time_seconds" in text:
            text = _WALL_SECONDS.sub(r"\1*", text)
        return text

    return normalise


def _walk(value: object, text: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {key: _walk(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, text) for item in value]
    return value
