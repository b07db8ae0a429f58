"""Who may connect to ``trio-agent serve --listen``: the listener's policy (pure, apart
from reading a token file).

Threat model. Whoever connects drives threads that run commands as the server's user,
so a connection is as powerful as that user. Two kinds of stranger can reach a
listening socket: a *web page* (any page the user's browser opens may open a WebSocket
to ``ws://127.0.0.1:PORT``, or reach it through DNS rebinding) and *another program or
local user* (anything that can reach the address). Browsers always send ``Origin`` on a
WebSocket handshake and no page can forge or omit it; programs written for the protocol
never send one. So:

- a handshake carrying ``Origin`` is refused (HTTP 403) unless the operator allowed
  that exact origin (``allowed_origins``, compared after lowercasing scheme and host):
  no web page drives the server by default, as with codex's app-server;
- with a capability token (``token_sha256``: codex's ``--ws-auth capability-token``),
  every handshake must carry ``Authorization: Bearer <token>`` (else HTTP 401); the
  SHA-256 digests are compared with ``hmac.compare_digest``, in constant time;
- listening beyond loopback (anything but 127.0.0.0/8, ::1 and ``localhost``) without a
  token is refused before the socket is opened (``check_exposure``): the network would
  reach an unauthenticated shell. On loopback without a token any local user can still
  connect; the command says so on stderr.

The token is never accepted in the URL (``?token=``): URLs end up in shell history,
proxy and server logs and ``Referer`` headers. Browsers cannot set ``Authorization``
on a WebSocket, so a page allowed by ``allowed_origins`` can only connect to a server
without a token (on loopback).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import attrs

__all__ = [
    "ListenerPolicy",
    "check_exposure",
    "digest_from_hex",
    "is_loopback",
    "normalise_origin",
    "token_from_env",
    "token_from_file",
]


def normalise_origin(text: str) -> str:
    """``scheme://host[:port]`` with scheme and host lowercased; ``ValueError`` for
    anything else (a path, credentials, ``null``, no host)."""
    parts = urlsplit(text.strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (not parts.scheme or not parts.hostname or parts.path or parts.query or parts.fragment or port == -1
            or "@" in parts.netloc):
        raise ValueError(f"an origin is scheme://host[:port] as a browser sends it (e.g. https://app.example), "
                         f"got {text!r}")
    host = parts.hostname
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "")


def _origins(values: Iterable[str]) -> frozenset[str]:
    return frozenset(normalise_origin(value) for value in values)


def _digest_size(instance: ListenerPolicy, attribute: attrs.Attribute[bytes | None], value: bytes | None) -> None:
    if value is not None and len(value) != hashlib.sha256().digest_size:
        raise ValueError(f"token_sha256 must be a SHA-256 digest ({hashlib.sha256().digest_size} bytes), "
                         f"got {len(value)} bytes")


@attrs.frozen
class ListenerPolicy:
    """What a WebSocket handshake must show to be served (see the module docstring).

    ``allowed_origins``: the browser origins allowed to connect (``scheme://host[:port]``,
    normalised on construction; a handshake with any other ``Origin`` gets 403).
    ``token_sha256``: the SHA-256 digest of the capability token every handshake must
    carry as ``Authorization: Bearer <token>`` (None: no token; loopback only).
    """

    allowed_origins: frozenset[str] = attrs.field(default=frozenset(), converter=_origins)
    token_sha256: bytes | None = attrs.field(default=None, validator=_digest_size)

    @classmethod
    def with_token(cls, token: str, *, allowed_origins: Iterable[str] = ()) -> ListenerPolicy:
        """A policy requiring ``token`` (a non-empty string)."""
        if not token:
            raise ValueError("the capability token is empty")
        return cls(frozenset(allowed_origins), hashlib.sha256(token.encode()).digest())

    @property
    def requires_token(self) -> bool:
        return self.token_sha256 is not None

    def origin_allowed(self, origin: str) -> bool:
        try:
            return normalise_origin(origin) in self.allowed_origins
        except ValueError:
            return False

    def token_accepted(self, token: bytes) -> bool:
        """Whether ``token`` is the capability token (constant time in its value)."""
        if self.token_sha256 is None:
            return True
        return hmac.compare_digest(hashlib.sha256(token).digest(), self.token_sha256)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (as given to ``--listen``) is reachable from this machine only."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False  # a name: it may resolve to any interface
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def check_exposure(host: str, policy: ListenerPolicy) -> None:
    """``ValueError`` saying why and what to do when ``host`` is beyond loopback and
    ``policy`` requires no token."""
    if policy.requires_token or is_loopback(host):
        return
    raise ValueError(
        f"refusing to listen on {host} without authentication: anyone who can reach it could run commands as "
        "this user; require a token (--ws-auth capability-token --ws-token-file PATH) or listen on 127.0.0.1")


def token_from_file(path: str | os.PathLike[str]) -> str:
    """The token in ``path``: its first line, stripped. ``ValueError`` for a file that
    cannot be read, is open to group or others, or holds an empty token."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            first = handle.readline(64 << 10)
    except OSError as exc:
        raise ValueError(f"--ws-token-file {file}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"--ws-token-file {file}: not a regular file")
    if mode & 0o077:
        raise ValueError(f"--ws-token-file {file} is open to group or others (mode {stat.S_IMODE(mode):04o}); "
                         f"make it private: chmod 600 {file}")
    try:
        token = first.decode().strip()
    except UnicodeDecodeError:
        raise ValueError(f"--ws-token-file {file}: its first line is not UTF-8 text") from None
    if not token:
        raise ValueError(f"--ws-token-file {file}: the first line is empty; write the token there")
    return token


def token_from_env(name: str, environ: Mapping[str, str]) -> str:
    """The token in the environment variable ``name`` (stripped; ``ValueError`` if unset or empty)."""
    token = environ.get(name, "").strip()
    if not token:
        raise ValueError(f"--ws-token-env {name}: the variable is unset or empty; export the token in it")
    return token


def digest_from_hex(text: str) -> bytes:
    """A SHA-256 digest given as 64 hex digits (``ValueError`` otherwise)."""
    try:
        digest = bytes.fromhex(text.strip())
    except ValueError:
        digest = b""
    if len(digest) != hashlib.sha256().digest_size:
        raise ValueError(f"--ws-token-sha256 takes the token's SHA-256 as 64 hex digits "
                         f"(e.g. from `printf %s TOKEN | sha256sum`), got {text!r}")
    return digest
