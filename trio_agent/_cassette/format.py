"""The cassette format, version 2 (user reference: ``docs/cassettes.md``).

A cassette is JSON Lines. Line 1 is the header::

    {"format": "trio-agent-cassette", "version": 1, "trio_agent": "0.1.0",
     "created": "2025-01-01T12:00:00Z", "transports": ["responses_websocket_v2"],
     "session": {"session_id": ..., "model": ..., "thinking": ..., "workspace": ..., ...}}

Every further line is one *observation*, in the order the agent saw them:
``{"t": <seconds since the recording started, Trio's clock>, "kind": <kind>, ...}``.
``conn`` numbers connections (WebSocket sockets and HTTPS requests alike) in the
order they were opened; ``agent`` is the agent's mail path (``/root``, a fork's
``/root/fork-1``). The last line is ``{"kind": "end"}``, written when the agent closed.

A frame (``ws.send``, ``ws.recv``) or server-sent event (``sse.event``) whose text is a
JSON object is stored as that object (``"json": {...}``), readable and diffable; any
other text as a string (``"text"``, ``"data"``), binary frames as base64 (``"bytes"``).
Version 1 (every frame a string) still loads: ``frame_text``/``frame_json`` read both.

Loading validates everything a replay relies on -- the header, each line's kind and
the types of its fields, that every connection was opened before it is used -- and
raises ``CassetteError`` naming the line, what is wrong with it and what to do.
Nothing here does I/O beyond reading the file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import final

import attrs

from .._errors import AgentError
from .._json_lines import LineProblem, NotJson, loads

__all__ = [
    "FORMAT",
    "INPUT_KINDS",
    "KINDS",
    "VERSION",
    "Cassette",
    "CassetteError",
    "CassetteHeader",
    "Observation",
    "RecordedConnection",
    "field_bool",
    "field_int",
    "field_str",
    "frame_json",
    "frame_text",
]

FORMAT = "trio-agent-cassette"
VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1: frames as JSON strings

_NONE = type(None)
# kind -> {required field: accepted JSON types}. ``int`` never accepts a bool.
KINDS: dict[str, dict[str, tuple[type, ...]]] = {
    "ws.open": {"conn": (int,), "agent": (str,), "url": (str,), "purpose": (str,),
                "request_headers": (dict,), "response_headers": (dict,)},
    "ws.error": {"conn": (int,), "agent": (str,), "url": (str,), "purpose": (str,), "error": (str,),
                 "status": (int, _NONE)},
    "ws.send": {"conn": (int,)},
    "ws.recv": {"conn": (int,)},
    "ws.close": {"conn": (int,), "by": (str,), "code": (int, _NONE), "reason": (str, _NONE)},
    "http.request": {"conn": (int,), "agent": (str,), "method": (str,), "url": (str,), "headers": (dict,),
                     "body": (dict,)},
    "http.response": {"conn": (int,), "status": (int,), "headers": (dict,)},
    "sse.event": {"conn": (int,)},
    "http.end": {"conn": (int,), "how": (str,)},
    "input.prompt": {"agent": (str,), "turn": (int,), "text": (str,)},
    "input.steer": {"agent": (str,), "turn": (int,), "text": (str,), "interrupt": (bool,)},
    "input.cancel": {"agent": (str,), "turn": (int,)},
    "input.compact": {"agent": (str,), "turn": (int,)},
    "input.inject": {"agent": (str,), "items": (list,), "joined": (bool,)},
    "input.mail": {"agent": (str,), "author": (str,), "text": (str,), "trigger_turn": (bool,), "turn": (int, _NONE)},
    "turn.end": {"agent": (str,), "turn": (int,), "status": (str,), "final_message": (str, _NONE)},
    "end": {},
}
INPUT_KINDS = (  # what replay() gives again
    "input.prompt", "input.steer", "input.cancel", "input.compact", "input.inject", "input.mail",
)
_CHOICES = {("ws.close", "by"): ("server", "client"), ("http.end", "how"): ("eof", "client_closed", "error")}
_SESSION_FIELDS: dict[str, tuple[type, ...]] = {
    "session_id": (str,), "model": (str,), "thinking": (str,), "fast_mode": (bool,), "store": (bool,),
    "history": (str,), "workspace": (str,), "instructions": (str, _NONE), "max_attempts": (int, _NONE),
}
_RECORD_AGAIN = "record the session again (trio-agent run --record FILE, or AgentConfig(record=...))"


class CassetteError(AgentError, ValueError):
    """A cassette that cannot be replayed: not a cassette, another format version, a
    line cut off or not JSON, an unknown observation kind or a malformed field. The
    message names the file and line, what is wrong and what to do."""


@final
@attrs.frozen
class CassetteHeader:
    """The first line: who recorded the cassette, when, over which transport, and the
    agent settings a replay needs to send the same requests."""

    version: int
    trio_agent: str
    created: str
    transports: tuple[str, ...]
    session_id: str
    model: str
    thinking: str
    fast_mode: bool
    store: bool
    history: str
    workspace: str
    instructions: str | None
    max_attempts: int | None
    #: The dialect spoken (``ta.Profile``); cassettes from before profiles were OpenAI's.
    profile: str = "openai"


@final
@attrs.frozen
class Observation:
    """One line after the header: ``line`` (1-based, in the file), ``t`` (seconds since
    the recording started), ``kind`` and the line's other fields as ``data``."""

    line: int
    t: float
    kind: str
    data: Mapping[str, object]

    @property
    def conn(self) -> int | None:
        """The recorded connection this observation belongs to (1, 2, ...), if any."""
        value = self.data.get("conn")
        return value if isinstance(value, int) else None


@final
@attrs.frozen
class RecordedConnection:
    """One connection: a WebSocket (``ws.open`` or a failed ``ws.error``) or one HTTPS
    request (``http.request``), and the observations on it after that, in order."""

    conn: int
    opening: Observation
    steps: tuple[Observation, ...]

    @property
    def websocket(self) -> bool:
        return self.opening.kind.startswith("ws.")


def frame_text(obs: Observation) -> str | None:
    """The text of a frame or event (``ws.send``, ``ws.recv``, ``sse.event``) as it went
    over the wire -- re-encoded when stored as a JSON object -- or None for a binary frame."""
    value = obs.data.get("json")
    if isinstance(value, dict):
        from .._jsontext import dumps

        return dumps(value)
    text = obs.data.get("data" if obs.kind == "sse.event" else "text")
    return text if isinstance(text, str) else None


def frame_json(obs: Observation) -> dict[str, object] | None:
    """A frame or event's JSON object (stored as one, or in a version-1 string), else None."""
    value = obs.data.get("json")
    if isinstance(value, dict):
        return value
    text = obs.data.get("data" if obs.kind == "sse.event" else "text")
    if not isinstance(text, str):
        return None
    import json

    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def field_str(obs: Observation, key: str) -> str:
    value = obs.data[key]
    assert isinstance(value, str), (obs.line, key)  # validated by the loader
    return value


def field_int(obs: Observation, key: str) -> int:
    value = obs.data[key]
    assert isinstance(value, int), (obs.line, key)
    return value


def field_bool(obs: Observation, key: str) -> bool:
    value = obs.data[key]
    assert isinstance(value, bool), (obs.line, key)
    return value


@final
@attrs.frozen
class Cassette:
    """A loaded, validated cassette. ``Cassette.load(path)`` reads one (``CassetteError``
    when it cannot be replayed); ``complete`` is False only for a cassette loaded with
    ``allow_incomplete=True`` that lacks its end line."""

    header: CassetteHeader
    observations: tuple[Observation, ...]
    complete: bool = True
    path: Path | None = None

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, allow_incomplete: bool = False) -> Cassette:
        """Read and validate the cassette at ``path``."""
        source = Path(path)
        try:
            data = source.read_bytes()
        except FileNotFoundError:
            raise CassetteError(f"{source}: no such cassette; check the path, or {_RECORD_AGAIN}") from None
        except OSError as exc:
            raise CassetteError(f"{source}: cannot read the cassette ({exc})") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise CassetteError(f"{source}, line {line}: not UTF-8 (byte {exc.start} of the file); the file is "
                                f"corrupt -- restore it from version control or {_RECORD_AGAIN}") from None
        return cls.loads(text, source=str(source), allow_incomplete=allow_incomplete, path=source)

    @classmethod
    def loads(
        cls, text: str, *, source: str = "<cassette>", allow_incomplete: bool = False, path: Path | None = None
    ) -> Cassette:
        """Validate cassette ``text``; ``source`` names it in error messages."""
        return _Loader(source).load(text, allow_incomplete, path)

    @property
    def transport(self) -> str:
        """The recorded transport (``Transport.value``)."""
        return self.header.transports[0]

    def inputs(self) -> tuple[Observation, ...]:
        """The prompts, steers, cancels, compactions, injections and mail the session received, in order."""
        return tuple(o for o in self.observations if o.kind in INPUT_KINDS)

    def turn_ends(self) -> tuple[Observation, ...]:
        """The ``turn.end`` observations, in order (one per recorded turn)."""
        return tuple(o for o in self.observations if o.kind == "turn.end")

    def connections(self) -> tuple[RecordedConnection, ...]:
        """Every connection, in the order it was opened, with its observations."""
        openings: dict[int, Observation] = {}
        steps: dict[int, list[Observation]] = {}
        for obs in self.observations:
            conn = obs.conn
            if conn is None:
                continue
            if conn not in openings:
                openings[conn] = obs
                steps[conn] = []
            else:
                steps[conn].append(obs)
        return tuple(RecordedConnection(conn, openings[conn], tuple(steps[conn])) for conn in openings)

    def client_requests(self) -> int:
        """How many requests and frames the agent sent (what a replay matches)."""
        return sum(1 for o in self.observations if o.kind in ("ws.send", "http.request"))


class _Loader:
    def __init__(self, source: str) -> None:
        self._source = source

    def _error(self, line: int | None, problem: str) -> CassetteError:
        where = f"{self._source}, line {line}" if line is not None else self._source
        return CassetteError(f"{where}: {problem}")

    def load(self, text: str, allow_incomplete: bool, path: Path | None) -> Cassette:
        lines = text.split("\n")  # never splitlines(): U+2028 may appear inside a JSON string
        if lines[-1] == "":
            lines.pop()
        if not text.strip():
            raise self._error(None, f"the file is empty, not a cassette; {_RECORD_AGAIN}")
        header = self._header(self._json(1, lines[0], last=len(lines) == 1))
        observations: list[Observation] = []
        kinds: dict[int, str] = {}  # conn -> "ws" | "http"
        closed: set[int] = set()
        complete = False
        for number, raw in enumerate(lines[1:], start=2):
            if complete:
                raise self._error(number, "a line after the end line; the file was appended to after the "
                                          f"recording finished -- remove the extra lines or {_RECORD_AGAIN}")
            obs = self._observation(number, self._json(number, raw, last=number == len(lines)))
            self._check_conn(obs, kinds, closed)
            complete = obs.kind == "end"
            if not complete:
                observations.append(obs)
        if not complete and not allow_incomplete:
            raise self._error(len(lines), "the cassette has no end line: the recording stopped before the agent "
                                          "closed (was the process killed?). Load it with "
                                          f"Cassette.load(path, allow_incomplete=True) to replay what it has, or "
                                          f"{_RECORD_AGAIN}")
        return Cassette(header, tuple(observations), complete, path)

    def _json(self, number: int, raw: str, *, last: bool) -> dict[str, object]:
        try:
            value = loads(raw)
        except NotJson as exc:
            if last:
                raise self._error(number, f"the last line is not complete JSON ({exc.detail}): the file looks "
                                          f"truncated; {_RECORD_AGAIN}") from None
            raise self._error(number, f"not valid JSON ({exc.detail}); the file is corrupt -- restore it from "
                                      f"version control or {_RECORD_AGAIN}") from None
        except LineProblem as exc:  # nested too deep, NaN, a number too long to read
            raise self._error(number, f"{exc}; the file is corrupt -- restore it from version control or "
                                      f"{_RECORD_AGAIN}") from None
        if not isinstance(value, dict):
            raise self._error(number, f"expected a JSON object, got {type(value).__name__}; the file is corrupt")
        return value

    def _header(self, value: dict[str, object]) -> CassetteHeader:
        if value.get("format") != FORMAT:
            raise self._error(1, f"not a trio_agent cassette: the first line has no \"format\": \"{FORMAT}\"; "
                                 f"{_RECORD_AGAIN}")
        version = value.get("version")
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            readable = ", ".join(map(str, READABLE_VERSIONS))
            raise self._error(1, f"cassette format version {version!r} is not supported: this trio_agent reads "
                                 f"versions {readable}. Replay it with the trio_agent that recorded it "
                                 f"({value.get('trio_agent')!r}) or {_RECORD_AGAIN}")
        transports = value.get("transports")
        if not isinstance(transports, list) or not transports or not all(isinstance(t, str) for t in transports):
            raise self._error(1, "the header's \"transports\" must be a non-empty list of transport names")
        session = value.get("session")
        if not isinstance(session, dict):
            raise self._error(1, "the header has no \"session\" object; the file is corrupt")
        for name, types in _SESSION_FIELDS.items():
            if name not in session or not _is(session[name], types):
                raise self._error(1, f"the header's session.{name} is missing or not {_type_names(types)}")
        for name in ("trio_agent", "created"):
            if not isinstance(value.get(name), str):
                raise self._error(1, f"the header's \"{name}\" is missing or not a string")
        self._check_settings(transports, session)
        profile = session.get("profile", "openai")
        from .._config import Profile

        if profile not in [member.value for member in Profile]:
            raise self._error(1, f"the header's session.profile {profile!r} is not one of "
                                 f"{', '.join(member.value for member in Profile)}; the cassette was written by "
                                 "another trio_agent or edited by hand")
        assert isinstance(version, int)
        return CassetteHeader(
            version=version, trio_agent=str(value["trio_agent"]), created=str(value["created"]),
            transports=tuple(transports), profile=str(profile),
            **{name: session[name] for name in _SESSION_FIELDS},
        )

    def _check_settings(self, transports: list[str], session: dict[str, object]) -> None:
        from .._config import History, Thinking, Transport

        for what, given, enum in (("transports[0]", transports[0], Transport), ("session.thinking",
                                  session["thinking"], Thinking), ("session.history", session["history"], History)):
            allowed = [member.value for member in enum]
            if given not in allowed:
                raise self._error(1, f"the header's {what} {given!r} is not one of {', '.join(allowed)}; the "
                                     "cassette was written by another trio_agent or edited by hand")

    def _observation(self, number: int, value: dict[str, object]) -> Observation:
        kind, t = value.get("kind"), value.get("t")
        if not isinstance(kind, str) or kind not in KINDS:
            known = ", ".join(sorted(KINDS))
            raise self._error(number, f"unknown observation kind {kind!r} (known: {known}); the cassette was "
                                      "written by a newer trio_agent or edited by hand -- upgrade trio_agent, "
                                      "fix the line, or record the session again")
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
            raise self._error(number, f"{kind}: \"t\" must be a non-negative number of seconds, got {t!r}")
        for name, types in KINDS[kind].items():
            if name not in value or not _is(value[name], types):
                raise self._error(number, f"{kind}: field \"{name}\" is missing or not {_type_names(types)}")
        for (choice_kind, name), allowed in _CHOICES.items():
            if kind == choice_kind and value[name] not in allowed:
                raise self._error(number, f"{kind}: \"{name}\" must be one of {', '.join(allowed)}, "
                                          f"got {value[name]!r}")
        if kind in ("ws.send", "ws.recv") and not (isinstance(value.get("text"), str) or isinstance(
                value.get("bytes"), str) or isinstance(value.get("json"), dict)):
            raise self._error(number, f"{kind}: a frame needs \"json\" (an object), \"text\" (a string) or "
                                      "\"bytes\" (base64)")
        if kind == "sse.event" and not (isinstance(value.get("data"), str) or isinstance(value.get("json"), dict)):
            raise self._error(number, f"{kind}: an event needs \"json\" (an object) or \"data\" (a string)")
        data = {k: v for k, v in value.items() if k not in ("t", "kind")}
        return Observation(number, float(t), kind, data)

    def _check_conn(self, obs: Observation, kinds: dict[int, str], closed: set[int]) -> None:
        conn = obs.conn
        if conn is None:
            return
        family = "ws" if obs.kind.startswith("ws.") else "http"
        opening = obs.kind in ("ws.open", "ws.error", "http.request")
        if opening:
            if conn in kinds:
                raise self._error(obs.line, f"{obs.kind}: connection {conn} was already opened earlier; "
                                            "connection numbers are unique")
            kinds[conn] = family
            if obs.kind == "ws.error":
                closed.add(conn)
            return
        if conn not in kinds:
            raise self._error(obs.line, f"{obs.kind}: connection {conn} was never opened (no ws.open or "
                                        "http.request line before it)")
        if kinds[conn] != family:
            raise self._error(obs.line, f"{obs.kind} on connection {conn}, which is "
                                        f"{'a WebSocket' if kinds[conn] == 'ws' else 'an HTTPS request'}")
        if conn in closed:
            raise self._error(obs.line, f"{obs.kind} on connection {conn} after it closed")
        if obs.kind in ("ws.close", "http.end"):
            closed.add(conn)


def _is(value: object, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _type_names(types: tuple[type, ...]) -> str:
    names = {int: "an integer", str: "a string", bool: "true/false", dict: "an object", list: "a list",
             _NONE: "null"}
    return " or ".join(names.get(t, t.__name__) for t in types)
