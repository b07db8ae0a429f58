"""Recording: the cassette add-on, attached to an agent tree through the observer seam.

Theory of operation: ``AgentConfig(record=...)`` on a root agent makes the package
face's add-on (``_wiring.py``) call ``open_cassette``, whose ``CassetteTree`` (an
``Attachment``, ``_runtime/_observers.py``) owns the tree's ``CassetteWriter`` and makes
one ``CassetteRecorder`` per agent of the tree. A recorder is that agent's connection
tap (``_transport/tap.py``): each WebSocket's opening (or failed handshake), every
frame sent and received and its close; each HTTPS request, its response head, its
SSE events (decoded here, from the chunks the exchange reads) and how it ended. The
transports choose the tapped path once per connection, never per frame. Prompts,
steers, cancels, compactions, injected items, the application's mail and turn ends come
through the seam's turn notices (accepted, steered, cancel_requested, compact_requested,
injected, mailed, ended).
With ``record`` unset none of this exists and the agent's paths are unchanged.

Secrets (``redaction.py``): header values named like credentials (``Authorization``,
``ChatGPT-Account-ID``, cookies, ``*key*``, ``*token*``, ``*secret*``) are replaced by
``<redacted>`` and remembered, and every recorded string -- frames, bodies, error
messages -- passes through the agent's ``Redactor`` (its API key and ChatGPT tokens),
those remembered values and the values of the environment's credential variables.
URLs lose their query string and user info.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._errors import ApiError, ConnectionFailed, ConnectionLost, ProtocolError, ResponsesError, ResponseTimeout
from .._jsontext import dumps
from .._runtime._observers import AgentObserver, AgentSite
from .._wire.sse import SseDecoder
from .redaction import REDACTED, SecretValues, secret_name
from .writer import CassetteWriter

if TYPE_CHECKING:
    from .._config import AgentConfig
    from .._runtime._secrets import Redactor
    from .._runtime._turns._turn import Prompt
    from .._transport.tap import Answer

__all__ = ["CassetteRecorder", "CassetteTree", "open_cassette"]

class CassetteTree:
    """The cassette of one agent tree (an ``Attachment``): its writer, shared by the
    recorders of the root and of every fork and child; closed (the end line) once the
    root's block ended."""

    def __init__(self, writer: CassetteWriter) -> None:
        self.writer = writer

    def observe(self, site: AgentSite) -> CassetteRecorder:
        return CassetteRecorder(self.writer, site.path, site.secrets)

    def close(self) -> None:
        self.writer.close()


def open_cassette(config: AgentConfig) -> CassetteTree:
    """Create ``config.record`` and write its header (``ConfigError`` if it cannot be created)."""
    from .. import __version__
    from .._errors import ConfigError

    assert config.record is not None
    session = {
        "session_id": config.session_id, "model": config.model, "thinking": config.thinking.value,
        "fast_mode": config.fast_mode, "store": config.store, "history": config.history.value,
        "workspace": str(config.resolved_workspace()), "instructions": config.instructions,
        "max_attempts": config.responses.max_attempts, "profile": config.profile.value,
    }
    try:
        return CassetteTree(CassetteWriter(config.record, transport=config.responses.transport.value,
                                           session=session, trio_agent=__version__))
    except OSError as exc:
        raise ConfigError(
            f"cannot create the cassette {str(config.record)!r}: {exc.strerror or exc}; record to a writable path"
        ) from exc


def clean_url(url: str) -> str:
    """``url`` without user info, query or fragment (where credentials hide)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class CassetteRecorder(AgentObserver):
    """One agent's front to the shared ``CassetteWriter``: its observer and its
    connection tap (``ConnectionTap``)."""

    name = "the cassette recorder"

    def __init__(self, writer: CassetteWriter, agent: str, redactor: Redactor) -> None:
        self.writer = writer
        self.agent = agent
        self.redactor = redactor  # the model client's: every credential it sends
        self._seen = SecretValues()  # credential values seen in headers, and the environment's
        self.tap = self

    # -- secrets -------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        return self._seen.scrub(self.redactor.text(text))

    def headers(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Lower-cased names -> values (repeated names joined by ``, ``), credentials redacted."""
        result: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            if secret_name(key):
                self._seen.add(value)
                value = REDACTED
            else:
                value = self.scrub(value)
            result[key] = f"{result[key]}, {value}" if key in result else value
        return result

    def scrub_json(self, value: dict[str, Any]) -> dict[str, Any]:
        text = dumps(value)
        scrubbed = self.scrub(text)
        if scrubbed == text:
            return value
        result: dict[str, Any] = json.loads(scrubbed)
        return result

    # -- observations --------------------------------------------------------------------

    def add(self, kind: str, fields: dict[str, Any], *, flush: bool = False) -> None:
        self.writer.add(kind, fields)
        if flush:
            self.writer.flush()

    def frame(self, kind: str, conn: int, message: str | bytes) -> None:
        if isinstance(message, str):
            self.writer.add(kind, _text_or_json(conn, "text", self.scrub(message)))
        else:
            self.writer.add(kind, {"conn": conn, "bytes": base64.b64encode(message).decode("ascii")})

    # -- the connection tap: WebSocket ------------------------------------------------

    def websocket_opened(self, url: str, purpose: str, request_headers: Iterable[tuple[str, str]],
                         response_headers: Mapping[str, str]) -> _SocketRecording:
        conn = self.writer.new_conn()
        self.add("ws.open", {
            "conn": conn, "agent": self.agent, "url": clean_url(url), "purpose": purpose,
            "request_headers": self.headers(request_headers), "response_headers": self.headers(
                response_headers.items()),
        }, flush=True)
        return _SocketRecording(self, conn)

    def websocket_failed(self, url: str, purpose: str, error: ResponsesError, response: Answer | None) -> None:
        """A handshake that failed (refused, rejected, timed out)."""
        fields: dict[str, Any] = {
            "conn": self.writer.new_conn(), "agent": self.agent, "url": clean_url(url), "purpose": purpose,
            "error": self.scrub(str(error)), "error_class": error.error_class, "status": error.status,
        }
        if response is not None:
            fields["body"] = self.scrub(response.body)
            fields["headers"] = self.headers(response.headers)
        self.add("ws.error", fields, flush=True)

    # -- the connection tap: HTTPS ------------------------------------------------------

    def request_opened(self, url: str, headers: Iterable[tuple[str, str]], body: dict[str, Any]) -> _RequestRecording:
        conn = self.writer.new_conn()
        self.add("http.request", {
            "conn": conn, "agent": self.agent, "method": "POST", "url": clean_url(url),
            "headers": self.headers(headers), "body": self.scrub_json(body),
        }, flush=True)
        return _RequestRecording(self, conn)

    # -- input and turns (the observer seam's turn notices) -------------------------------

    def accepted(self, turn_id: int, prompt: Prompt | None) -> None:
        """A turn was accepted: record its prompt (automatic turns -- raw items, mail --
        are not replayed)."""
        if prompt is not None:
            self.prompt(turn_id, prompt)

    def prompt(self, turn_id: int, prompt: Prompt) -> None:
        fields: dict[str, Any] = {"agent": self.agent, "turn": turn_id, "text": self.scrub(prompt.text)}
        if prompt.images:
            fields["images"] = list(prompt.images)
        self.add("input.prompt", fields, flush=True)

    def steered(self, turn_id: int, text: str, interrupt: bool) -> None:
        self.add("input.steer", {"agent": self.agent, "turn": turn_id, "text": self.scrub(text),
                                 "interrupt": interrupt}, flush=True)

    def compact_requested(self, turn_id: int) -> None:
        self.add("input.compact", {"agent": self.agent, "turn": turn_id}, flush=True)

    def injected(self, items: list[dict[str, Any]], joined: bool) -> None:
        scrubbed = self.scrub_json({"items": items})["items"]
        self.add("input.inject", {"agent": self.agent, "items": scrubbed, "joined": joined}, flush=True)

    def mailed(self, author: str, text: str, trigger_turn: bool, turn_id: int | None) -> None:
        self.add("input.mail", {"agent": self.agent, "author": author, "text": self.scrub(text),
                                "trigger_turn": trigger_turn, "turn": turn_id}, flush=True)

    def cancel_requested(self, turn_id: int) -> None:
        self.add("input.cancel", {"agent": self.agent, "turn": turn_id}, flush=True)

    def ended(self, turn_id: int, status: str, final_message: str | None) -> None:
        message = self.scrub(final_message) if final_message is not None else None
        self.add("turn.end", {"agent": self.agent, "turn": turn_id, "status": status, "final_message": message},
                 flush=True)


def _text_or_json(conn: int, key: str, text: str) -> dict[str, Any]:
    """A frame's or event's fields: ``json`` (the object itself) when its text is a JSON
    object, else the text under ``key`` (format version 2: no JSON inside strings)."""
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return {"conn": conn, "json": value}
    return {"conn": conn, key: text}


class _SocketRecording:
    """One WebSocket's frames and close (its ``SocketTap``)."""

    def __init__(self, recorder: CassetteRecorder, conn: int) -> None:
        self._recorder = recorder
        self._conn = conn

    def sent(self, message: str) -> None:
        self._recorder.frame("ws.send", self._conn, message)
        self._recorder.writer.flush()  # a request is a boundary: what the server streamed is on disk

    def received(self, message: str | bytes) -> None:
        self._recorder.frame("ws.recv", self._conn, message)

    def closed(self, *, by_server: bool, code: int | None, reason: str | None) -> None:
        # by the server: a close frame, or 1006 for a dropped TCP connection
        by = "server" if by_server else "client"
        self._recorder.add("ws.close", {"conn": self._conn, "by": by, "code": code, "reason": reason}, flush=True)


class _RequestRecording:
    """One HTTPS request's head, SSE events and end (its ``RequestTap``)."""

    def __init__(self, tap: CassetteRecorder, conn: int) -> None:
        self._tap = tap
        self._conn = conn
        self._decoder: SseDecoder | None = SseDecoder()
        self.head_seen = False
        self.eof = False
        self.transport_failed = False
        self._ended = False

    def head(self, status: int, headers: list[tuple[str, str]], error_body: str | None) -> None:
        self.head_seen = True
        fields: dict[str, Any] = {"conn": self._conn, "status": status, "headers": self._tap.headers(headers)}
        if error_body is not None:
            fields["body"] = self._tap.scrub(error_body)
            self.eof = True  # a whole error response
        self._tap.add("http.response", fields)

    def body_ended(self, error: BaseException | None) -> None:
        if error is None:
            self.eof = True
        else:
            self.transport_failed = True

    def received(self, chunk: bytes) -> None:
        if self._decoder is None:
            return
        try:
            for data in self._decoder.feed(chunk):
                self._tap.add("sse.event", _text_or_json(self._conn, "data", self._tap.scrub(data)))
        except ProtocolError:
            self._decoder = None  # not an event stream any more; the exchange fails it itself

    def closed(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        fields: dict[str, Any] = {"conn": self._conn}
        server_side = (ConnectionLost, ResponseTimeout, ConnectionFailed, ApiError)
        if self.eof:
            fields["how"] = "eof"
        elif isinstance(error, server_side) and (self.transport_failed or not self.head_seen):
            fields.update(how="error", error=self._tap.scrub(str(error)), error_class=error.error_class)
        else:
            fields["how"] = "client_closed"
        self._tap.add("http.end", fields, flush=True)
