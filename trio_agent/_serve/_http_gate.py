"""The WebSocket listener's front door: each new TCP connection's HTTP request head is
read and judged before any WebSocket or JSON-RPC happens.

Theory of operation. ``read_head`` reads one request head (h11, at most
``MAX_HEAD_BYTES``, within the caller's deadline). ``judge`` (pure) decides what it
gets, in this order:

1. an ``Origin`` the policy does not allow: **403** (browsers send ``Origin``, programs
   do not; see ``_listen_policy``) -- whatever the path;
2. ``GET /healthz`` (the process serves) and ``GET /readyz`` (the server takes new
   work; 503 while it shuts down): **200** ``ok``, no token needed -- the answer says
   nothing but that;
3. no, or the wrong, ``Authorization: Bearer <token>`` where the policy requires one:
   **401** (``WWW-Authenticate: Bearer``);
4. anything but a WebSocket handshake (RFC 6455 version 13): **400** (426 for another
   version);
5. else the connection is admitted if the listener serves fewer than its
   ``max_connections`` (``_transports``), else **503** (``too_many``: how many, and
   what to do); an admitted connection's bytes read so far are replayed
   (``Replayed``) to trio-websocket, which performs the handshake.

Refusals are short ``text/plain`` answers, then the connection is closed. Nothing is
decided from the URL but the health paths: any other path is the WebSocket, as before.
"""

from __future__ import annotations

import attrs
import h11
import trio

from ._listen_policy import ListenerPolicy

__all__ = ["MAX_HEAD_BYTES", "Head", "Refusal", "Replayed", "judge", "read_head", "send_refusal", "too_many"]

MAX_HEAD_BYTES = 16 << 10
_READ_SIZE = 4096
_HEALTH = {"/healthz", "/readyz"}
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 426: "Upgrade Required",
            431: "Request Header Fields Too Large", 503: "Service Unavailable"}


@attrs.frozen
class Head:
    """A request head: method, target, headers (names lowercased), and every byte read."""

    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    data: bytes

    def values(self, name: bytes) -> list[bytes]:
        return [value for key, value in self.headers if key == name]


@attrs.frozen
class Refusal:
    """An HTTP answer that ends the connection (a 200 for a health check, too)."""

    status: int
    body: str
    headers: tuple[tuple[str, str], ...] = ()

    def encode(self) -> bytes:
        body = self.body.encode()
        lines = [f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Error')}",
                 "content-type: text/plain; charset=utf-8", f"content-length: {len(body)}", "connection: close",
                 *(f"{name}: {value}" for name, value in self.headers)]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def read_head(stream: trio.abc.ReceiveStream) -> Head | Refusal | None:
    """The next request head on ``stream``; a ``Refusal`` (400/431) for what is not HTTP,
    None when the peer closed first. The caller bounds the time."""
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    data = bytearray()
    while True:
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError as exc:
            return Refusal(exc.error_status_hint, "not an HTTP request this server understands\n")
        if isinstance(event, h11.Request):
            return Head(event.method, event.target, tuple((k, v) for k, v in event.headers), bytes(data))
        if event is not h11.NEED_DATA:  # ConnectionClosed (EOF before a request)
            return None
        chunk = await stream.receive_some(_READ_SIZE)
        data += chunk
        parser.receive_data(bytes(chunk))


def _bearer(head: Head) -> bytes | None:
    values = head.values(b"authorization")
    if len(values) != 1:
        return None
    scheme, _, token = values[0].strip().partition(b" ")
    token = token.strip()
    return token if scheme.lower() == b"bearer" and token else None


def _is_upgrade(head: Head) -> bool:
    connection = b",".join(head.values(b"connection")).lower()
    return (head.method == b"GET" and b"upgrade" in (token.strip() for token in connection.split(b","))
            and [value.strip().lower() for value in head.values(b"upgrade")] == [b"websocket"]
            and len(head.values(b"sec-websocket-key")) == 1 and head.target.isascii() and _one_host(head))


def _one_host(head: Head) -> bool:
    hosts = head.values(b"host")
    try:
        return len(hosts) == 1 and bool(hosts[0].decode("idna"))  # as the WebSocket library reads it
    except UnicodeError:
        return False


def _shown(value: bytes) -> str:
    text = value.decode("latin-1")
    text = "".join(char if char.isprintable() and char.isascii() else "?" for char in text)
    return text if len(text) <= 100 else text[:97] + "..."


def judge(head: Head, policy: ListenerPolicy, *, ready: bool) -> Refusal | None:
    """What ``head`` gets (see the module docstring); None: admitted."""
    origins = head.values(b"origin")
    if origins and not (len(origins) == 1 and policy.origin_allowed(origins[0].decode("latin-1"))):
        shown = _shown(origins[0]) if len(origins) == 1 else "(several)"
        return Refusal(403, f"forbidden: the Origin {shown} may not connect (a web page may not drive this "
                            "server; the operator can allow one origin with --allow-origin)\n")
    path = head.target.split(b"?", 1)[0].decode("latin-1")
    if path in _HEALTH and head.method == b"GET" and not head.values(b"upgrade"):
        if path == "/readyz" and not ready:
            return Refusal(503, "shutting down\n")
        return Refusal(200, "ok\n")
    if policy.requires_token:
        token = _bearer(head)
        if token is None or not policy.token_accepted(token):
            what = "a wrong" if token is not None else "no"
            return Refusal(401, f"unauthorized: {what} capability token; send `Authorization: Bearer <token>` in "
                                "the WebSocket handshake\n", (("www-authenticate", "Bearer"),))
    if not _is_upgrade(head):
        return Refusal(400, "this is a WebSocket endpoint (JSON-RPC, the Codex app-server protocol); "
                            "health checks: GET /healthz, GET /readyz\n")
    if head.values(b"sec-websocket-version") != [b"13"]:
        return Refusal(426, "WebSocket version 13 only\n", (("sec-websocket-version", "13"),))
    return None


def too_many(limit: int) -> Refusal:
    """The answer to an admissible handshake when ``limit`` connections are served already."""
    return Refusal(503, f"too many connections: this server serves at most {limit} WebSocket connections at once "
                        "(--max-connections); close one of yours and retry, or restart the server with a higher "
                        "--max-connections\n", (("retry-after", "1"),))


async def send_refusal(stream: trio.abc.SendStream, refusal: Refusal) -> None:
    """Answer ``refusal`` (the caller closes the stream and bounds the time)."""
    try:
        await stream.send_all(refusal.encode())
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


class Replayed(trio.abc.Stream):
    """``stream`` whose first bytes received are ``prefix`` (the head already read),
    so the WebSocket library sees the connection from its start."""

    def __init__(self, stream: trio.SocketStream, prefix: bytes) -> None:
        self.stream = stream
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self._prefix:
            return await self.stream.receive_some(max_bytes)
        size = len(self._prefix) if max_bytes is None else max_bytes
        data, self._prefix = self._prefix[:size], self._prefix[size:]
        await trio.lowlevel.checkpoint()
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self.stream.send_eof()

    async def aclose(self) -> None:
        await self.stream.aclose()
