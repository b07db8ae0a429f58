"""Recording: the per-agent ``CassetteTap`` and the transport wrappers it installs.

Theory of operation: recording is chosen once, where a connection or client is made,
never per frame. ``Connections`` builds each WebSocket with ``make_link`` =
``RecordingLink`` (a ``WebSocketLink`` whose send, receive and abandon also write
the cassette), and the model client gives its HTTPS transport an ``observer``
(``HttpsRecording``) that sees each request, its response head, its SSE events
(decoded here, from the chunks the exchange reads) and how it ended. Prompts,
steers and turn ends come from the turn queue, the turn handle and the reporter.
With ``record`` unset none of this exists and the agent's paths are unchanged.

Secrets: header values named like credentials (``Authorization``, ``ChatGPT-Account-ID``,
cookies, ``*key*``, ``*token*``, ``*secret*``) are replaced by ``<redacted>`` and
remembered, and every recorded string -- frames, bodies, error messages -- passes
through the agent's ``Redactor`` (its API key and ChatGPT tokens) and those
remembered values. URLs lose their query string and user info.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import trio_websocket

from .._errors import ApiError, ConnectionFailed, ConnectionLost, ProtocolError, ResponsesError, ResponseTimeout
from .._jsontext import dumps
from .._runtime._secrets import REDACTED, Redactor
from .._transport.websocket import WebSocketLink, WebSocketOptions
from .._wire.sse import SseDecoder
from .writer import CassetteWriter

if TYPE_CHECKING:
    from .._config import AgentConfig
    from .._runtime._turn import Prompt, TurnState
    from .._transport.https import RequestObserver

__all__ = ["CassetteTap", "HttpsRecording", "RecordingLink", "open_cassette"]

_SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "chatgpt-account-id",
    "openai-organization", "openai-project",
})
_SECRET_WORDS = ("key", "token", "secret", "password")


def open_cassette(config: AgentConfig) -> CassetteWriter:
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
        return CassetteWriter(config.record, transport=config.responses.transport.value, session=session,
                              trio_agent=__version__)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the cassette {str(config.record)!r}: {exc.strerror or exc}; record to a writable path"
        ) from exc


def _secret_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in _SECRET_HEADERS or any(word in lowered for word in _SECRET_WORDS)


def clean_url(url: str) -> str:
    """``url`` without user info, query or fragment (where credentials hide)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class CassetteTap:
    """One agent's front to the shared ``CassetteWriter``."""

    def __init__(self, writer: CassetteWriter, agent: str) -> None:
        self.writer = writer
        self.agent = agent
        self.redactor = Redactor()  # the model client replaces it with its own
        self._seen: list[str] = []  # credential values seen in headers

    # -- secrets -------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        text = self.redactor.text(text)
        for secret in self._seen:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def headers(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Lower-cased names -> values (repeated names joined by ``, ``), credentials redacted."""
        result: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            if _secret_header(key):
                self._remember(value)
                value = REDACTED
            else:
                value = self.scrub(value)
            result[key] = f"{result[key]}, {value}" if key in result else value
        return result

    def _remember(self, value: str) -> None:
        for part in (value, value.removeprefix("Bearer ").strip()):
            if len(part) >= 8 and part not in self._seen:
                self._seen.append(part)

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
            self.writer.add(kind, {"conn": conn, "text": self.scrub(message)})
        else:
            self.writer.add(kind, {"conn": conn, "bytes": base64.b64encode(message).decode("ascii")})

    # -- WebSocket -----------------------------------------------------------------------

    def link_factory(
        self, purpose: str
    ) -> Callable[[trio_websocket.WebSocketConnection, WebSocketOptions], WebSocketLink]:
        def make(ws: trio_websocket.WebSocketConnection, options: WebSocketOptions) -> WebSocketLink:
            return RecordingLink(ws, options, self, purpose)

        return make

    def websocket_failed(self, purpose: str, url: str, exc: ResponsesError) -> None:
        """A handshake that failed (refused, rejected, timed out)."""
        fields: dict[str, Any] = {
            "conn": self.writer.new_conn(), "agent": self.agent, "url": clean_url(url), "purpose": purpose,
            "error": self.scrub(str(exc)), "error_class": exc.error_class, "status": exc.status,
        }
        rejected = _rejection(exc)
        if rejected is not None:
            fields["body"] = self.scrub((rejected.body or b"").decode("utf-8", "replace"))
            fields["headers"] = self.headers(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in rejected.headers or ()
            )
        self.add("ws.error", fields, flush=True)

    # -- HTTPS ---------------------------------------------------------------------------

    def https_observer(self) -> HttpsRecording:
        return HttpsRecording(self)

    # -- input and turns -----------------------------------------------------------------

    def accepted(self, state: TurnState) -> None:
        """A turn was accepted: record its prompt and watch its steers."""
        if state.prompt is None:
            return  # automatic turns (raw items, mail) are not replayed
        self.prompt(state.turn_id, state.prompt)
        turn_id = state.turn_id
        state.on_steer = lambda text, interrupt: self.steer(turn_id, text, interrupt)

    def prompt(self, turn_id: int, prompt: Prompt) -> None:
        fields: dict[str, Any] = {"agent": self.agent, "turn": turn_id, "text": self.scrub(prompt.text)}
        if prompt.images:
            fields["images"] = list(prompt.images)
        self.add("input.prompt", fields, flush=True)

    def steer(self, turn_id: int, text: str, interrupt: bool) -> None:
        self.add("input.steer", {"agent": self.agent, "turn": turn_id, "text": self.scrub(text),
                                 "interrupt": interrupt}, flush=True)

    def turn_end(self, turn_id: int, status: str, final_message: str | None) -> None:
        message = self.scrub(final_message) if final_message is not None else None
        self.add("turn.end", {"agent": self.agent, "turn": turn_id, "status": status, "final_message": message},
                 flush=True)


class RecordingLink(WebSocketLink):
    """A ``WebSocketLink`` that records its opening, every frame and its close."""

    def __init__(
        self, ws: trio_websocket.WebSocketConnection, options: WebSocketOptions, tap: CassetteTap, purpose: str
    ) -> None:
        super().__init__(ws, options)
        self._tap = tap
        self._conn = tap.writer.new_conn()
        self._close_recorded = False
        tap.add("ws.open", {
            "conn": self._conn, "agent": tap.agent, "url": clean_url(options.url), "purpose": purpose,
            "request_headers": tap.headers(options.headers), "response_headers": tap.headers(
                self.handshake_headers.items()),
        }, flush=True)

    async def send_text(self, text: str) -> None:
        await super().send_text(text)
        self._tap.frame("ws.send", self._conn, text)
        self._tap.writer.flush()  # a request is a boundary: what the server streamed is on disk

    async def receive_text(self) -> str | bytes:
        message = await super().receive_text()
        self._tap.frame("ws.recv", self._conn, message)
        return message

    def abandon(self) -> None:
        if not self._close_recorded:
            self._close_recorded = True
            reason = self.close_reason
            if reason is None:
                fields: dict[str, Any] = {"by": "client", "code": None, "reason": None}
            else:  # the server closed it (a close frame, or 1006 for a dropped TCP connection)
                fields = {"by": "server", "code": reason.code, "reason": reason.reason}
            self._tap.add("ws.close", {"conn": self._conn, **fields}, flush=True)
        super().abandon()


class HttpsRecording:
    """``HttpsTransport.observer`` while recording: one ``_RequestRecording`` per request."""

    def __init__(self, tap: CassetteTap) -> None:
        self._tap = tap

    def request(self, url: str, headers: Sequence[tuple[str, str]], body: dict[str, Any]) -> RequestObserver:
        tap = self._tap
        conn = tap.writer.new_conn()
        tap.add("http.request", {
            "conn": conn, "agent": tap.agent, "method": "POST", "url": clean_url(url),
            "headers": tap.headers(headers), "body": tap.scrub_json(body),
        }, flush=True)
        return _RequestRecording(tap, conn)


class _RequestRecording:
    def __init__(self, tap: CassetteTap, conn: int) -> None:
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

    def chunks(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        return _RecordedChunks(chunks, self)

    def events(self, chunk: bytes) -> None:
        if self._decoder is None:
            return
        try:
            for data in self._decoder.feed(chunk):
                self._tap.add("sse.event", {"conn": self._conn, "data": self._tap.scrub(data)})
        except ProtocolError:
            self._decoder = None  # not an event stream any more; the exchange fails it itself

    def end(self, error: BaseException | None) -> None:
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


class _RecordedChunks:
    """The body chunks, with their SSE events recorded (an iterator object, not an async
    generator: nothing is left for the garbage collector when a stream is given up)."""

    def __init__(self, inner: AsyncIterator[bytes], recording: _RequestRecording) -> None:
        self._inner = inner
        self._recording = recording

    def __aiter__(self) -> _RecordedChunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._inner.__anext__()
        except StopAsyncIteration:
            self._recording.eof = True
            raise
        except Exception:
            self._recording.transport_failed = True
            raise
        self._recording.events(chunk)
        return chunk


def _rejection(exc: BaseException) -> trio_websocket.ConnectionRejected | None:
    """The trio-websocket rejection behind a failed handshake, if there is one."""
    stack: list[BaseException] = [exc]
    for _ in range(16):
        if not stack:
            return None
        current = stack.pop()
        if isinstance(current, trio_websocket.ConnectionRejected):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)
    return None
