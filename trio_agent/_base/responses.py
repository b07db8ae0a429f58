"""The Responses API endpoint: ``Responses`` (transport, storage, history policy,
timeouts, dialer), its enums (``Transport``, ``Profile``, ``History``) and what is
derived from them -- the dialect an endpoint speaks, and the URLs an agent uses.

A value of the configuration layer (docs/architecture.md, "Layers"), apart from
``AgentConfig`` (``_config.py``, which re-exports every public name here): everything
about *where and how* the agent talks, as opposed to *what* the agent is. Validated on
construction, so a bad combination fails where it is written (SPEC sec. 6).
"""

from __future__ import annotations

import enum
import math
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import ConfigError

if TYPE_CHECKING:
    import httpx
    import trio

__all__ = [
    "CHATGPT_API_BASE_URL",
    "DEFAULT_API_BASE_URL",
    "History",
    "Profile",
    "Responses",
    "Transport",
    "api_base_url",
    "endpoint_profile",
    "websocket_url",
]

DEFAULT_API_BASE_URL = "https://api.openai.com/v1"
CHATGPT_API_BASE_URL = "https://chatgpt.com/backend-api/codex"


class Transport(enum.Enum):
    """How the agent talks to the Responses API."""

    WEBSOCKET = "responses_websocket_v2"
    HTTPS = "responses_https_sse"


class Profile(enum.Enum):
    """Which dialect of the Responses API the agent speaks (docs/compatibility.md).

    ``OPENAI``: OpenAI's own servers, as SPEC and the reference suites have it -- the
    tools inside the ``additional_tools`` input item, ``store``/``previous_response_id``
    chaining, the ``generate: false`` warmup, ``include``, ``reasoning`` and
    ``client_metadata``. ``GENERIC``: public Responses semantics, for LiteLLM, vLLM,
    Ollama, llama-stack and Responses-to-Chat bridges -- top-level ``tools`` on every
    request (``exec`` and custom tools as function tools taking one string), ``store:
    false`` with the whole conversation in every request, no warmup request, no private
    fields, and ``reasoning``/``include`` only when a thinking level is asked for.
    ``Responses(profile=None)`` picks ``OPENAI`` for OpenAI's hosts (``api.openai.com``,
    ``*.openai.com``, ``chatgpt.com``) and ``GENERIC`` for every other host, loopback
    included."""

    OPENAI = "openai"
    GENERIC = "generic"


#: Hosts (and their subdomains) that speak OpenAI's own dialect (``Profile.OPENAI``).
OPENAI_HOSTS = ("openai.com", "chatgpt.com")


def endpoint_profile(url: str) -> Profile:
    """The profile a URL's host implies: ``OPENAI`` for OpenAI's hosts, else ``GENERIC``."""
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return Profile.GENERIC
    if any(host == known or host.endswith("." + known) for known in OPENAI_HOSTS):
        return Profile.OPENAI
    return Profile.GENERIC


class History(enum.Enum):
    """Whether requests chain on ``previous_response_id`` or replay everything."""

    INCREMENTAL = "incremental"
    FULL_REPLAY = "full_history"


def _check_url(name: str, schemes: tuple[str, ...]) -> Callable[[Any, Any, str | None], None]:
    def check(_instance: Any, _attribute: Any, value: str | None) -> None:
        if value is None:
            return
        if not isinstance(value, str) or not value.startswith(schemes):
            raise ConfigError(
                f"{name} must start with {' or '.join(schemes)}, got {value!r}; "
                f"pass a full URL such as {schemes[-1]}//api.openai.com/v1"
            )

    return check


@attrs.frozen
class Responses:
    """Transport, storage and history policy for the Responses API.

    ``store=None`` means "the default for the auth": True for API keys, False for
    ChatGPT auth. ``history=None`` means "derived, as nanocodex does": FULL_REPLAY for
    HTTPS with ``store: false`` (HTTPS cannot chain on responses it did not store),
    INCREMENTAL otherwise; only an explicit ``History.INCREMENTAL`` with HTTPS and
    ``store: false`` is refused. ``history`` reads back the *effective* policy: at once
    when ``store`` is given, and in ``AgentConfig.responses`` (which knows the auth)
    always; a bare ``Responses(store=None)`` whose policy depends on the auth reads
    ``None``. ``max_attempts=None`` means the library default (5 per model call).
    ``ssl_context`` is the TLS context for ``wss://`` (a private CA, a proxy's root),
    and for ``https://`` when the agent makes its own HTTPS client; an ``http_client``
    of yours keeps its own TLS settings.

    Timeouts (seconds, Trio's clock): ``connect_timeout`` bounds dialing, TLS and the
    WebSocket handshake together (HTTPS: connecting, and waiting for a connection from
    the pool); ``handshake_timeout`` additionally bounds the handshake part alone
    (WebSocket: from the connected socket to ``101``; HTTPS: from sending the request to
    the response head) and defaults to ``connect_timeout``; ``idle_timeout`` is the
    longest a response may go without a frame (one timer per response, pushed forward
    by every frame). Each expiry fails the attempt with a retryable error. See the
    README ("Guarantees") for the worst-case time a silent server can hold a turn.

    ``dialer`` replaces ``trio.open_tcp_stream``: ``await dialer(host, port)`` returns a
    connected ``trio.abc.Stream`` (host and port come from the URL). TLS is still
    layered on top for ``wss://``/``https://``. The WebSocket transport dials every
    socket through it, and so does HTTPS when no ``http_client`` is given (the
    application's own client keeps its own transport). Its exceptions are treated like
    a socket's: ``OSError`` (e.g. ``ConnectionRefusedError``) and
    ``trio.BrokenResourceError`` are a failed connection; anything else propagates as a
    bug. ``trio_agent.testing.FakeResponsesServer.in_memory()`` provides one for
    deterministic tests with no real socket.
    """

    # The transport as given (None: a WebSocket that falls back to HTTPS once when the
    # server has no WebSocket endpoint); ``transport`` is the one used first.
    _transport: Transport | None = attrs.field(default=None, alias="transport")
    websocket_url: str | None = attrs.field(
        default=None, validator=_check_url("websocket_url", ("ws:", "wss:"))
    )
    api_base_url: str | None = attrs.field(
        default=None, validator=_check_url("api_base_url", ("http:", "https:"))
    )
    store: bool | None = None
    # The dialect as given (None: derived from the endpoint); ``profile`` is the effective one.
    _profile: Profile | None = attrs.field(default=None, alias="profile")
    # The policy as given (None: derive it); ``history`` is the effective one.
    _history: History | None = attrs.field(default=None, alias="history")
    max_attempts: int | None = None
    http_client: httpx.AsyncClient | None = None
    ssl_context: ssl.SSLContext | None = None
    dialer: Callable[[str, int], Awaitable[trio.abc.Stream]] | None = None
    connect_timeout: float = 30.0
    handshake_timeout: float | None = None
    idle_timeout: float = 300.0
    # The auth's default ``store`` (set by ``AgentConfig`` on its own copy), so that
    # ``history`` can be derived when ``store`` is left to the auth.
    _auth_store: bool | None = attrs.field(default=None, alias="_auth_store", repr=False, eq=False)

    @property
    def transport(self) -> Transport:
        """The transport used first (``WEBSOCKET`` unless given)."""
        return self._transport if self._transport is not None else Transport.WEBSOCKET

    @property
    def https_fallback(self) -> bool:
        """Whether a WebSocket handshake answered without ``101`` (404, 405, 426, 200...)
        moves the agent to HTTPS, once: only when neither the transport nor the WebSocket
        URL was given (the URL is derived from ``api_base_url``, whose HTTPS endpoint the
        agent then uses). A WebSocket asked for keeps failing, with a hint."""
        return self._transport is None and self.websocket_url is None

    @property
    def profile(self) -> Profile:
        """The effective dialect: as given, else from the host of the endpoint used
        first (the WebSocket URL, else the API base URL; none given: OpenAI's)."""
        if self._profile is not None:
            return self._profile
        url = self.websocket_url if self.transport is Transport.WEBSOCKET and self.websocket_url else None
        url = url or self.api_base_url
        return endpoint_profile(url) if url else Profile.OPENAI

    @property
    def default_store(self) -> bool | None:
        """``store`` as given, else the default: False for ``Profile.GENERIC``, else the
        auth's (None while unknown)."""
        if self.store is not None:
            return self.store
        if self.profile is Profile.GENERIC:
            return False
        return self._auth_store

    @property
    def history(self) -> History | None:
        """The effective history policy: as given, else derived from the profile, the
        transport and the (effective) ``store``; ``None`` only while it still depends on
        the auth. ``Profile.GENERIC`` replays in full unless told otherwise: most servers
        other than OpenAI's keep no chain a request could name."""
        if self._history is not None:
            return self._history
        if self.profile is Profile.GENERIC and self.store is not True:
            return History.FULL_REPLAY
        store = self.default_store
        if store is None:
            return None
        return History.FULL_REPLAY if self.transport is Transport.HTTPS and not store else History.INCREMENTAL

    def __repr__(self) -> str:
        fields = (field for field in attrs.fields(Responses) if field.repr)
        shown = ", ".join(f"{field.alias}={getattr(self, field.name)!r}" for field in fields)
        return f"Responses({shown})"

    def __attrs_post_init__(self) -> None:
        for name in ("connect_timeout", "handshake_timeout", "idle_timeout"):
            value = getattr(self, name)
            if value is None and name == "handshake_timeout":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ConfigError(f"{name} must be a positive, finite number of seconds, got {value!r}")
        if self.dialer is not None and not callable(self.dialer):
            raise ConfigError(
                f"dialer must be an async callable (host, port) -> trio.abc.Stream, got {self.dialer!r}"
            )
        if self._transport is not None and not isinstance(self._transport, Transport):
            raise ConfigError(f"transport must be a ta.Transport or None (WebSocket, else HTTPS), "
                              f"got {self._transport!r}")
        if self._profile is not None and not isinstance(self._profile, Profile):
            raise ConfigError(f"profile must be a ta.Profile or None (from the endpoint), got {self._profile!r}")
        if self._history is not None and not isinstance(self._history, History):
            raise ConfigError(f"history must be a ta.History or None (derived), got {self._history!r}")
        if self.store is not None and not isinstance(self.store, bool):
            raise ConfigError(f"store must be True, False or None (the auth's default), got {self.store!r}")
        if self.max_attempts is not None and (
            not isinstance(self.max_attempts, int) or self.max_attempts < 1
        ):
            raise ConfigError(
                f"max_attempts must be a positive integer or None, got {self.max_attempts!r}"
            )
        self.check_history(self.store)

    def check_history(self, store: bool | None) -> None:
        """Refuse an explicit INCREMENTAL policy that HTTPS with ``store`` cannot honour."""
        if self.transport is Transport.HTTPS and store is False and self._history is History.INCREMENTAL:
            raise ConfigError(
                "HTTPS with store: false requires full client-history replay; omit history= (HTTPS "
                "with store: false then replays in full), pass history=History.FULL_REPLAY, or store=True"
            )


def api_base_url(responses: Responses, *, chatgpt: bool) -> str:
    """The HTTPS base URL: ``responses.api_base_url`` (without a trailing ``/``), else
    the default of the auth (ChatGPT's Codex backend, or OpenAI's API)."""
    if responses.api_base_url:
        return responses.api_base_url.rstrip("/")
    return CHATGPT_API_BASE_URL if chatgpt else DEFAULT_API_BASE_URL


def websocket_url(responses: Responses, *, chatgpt: bool) -> str:
    """The WebSocket endpoint: ``responses.websocket_url``, else derived from the base URL."""
    if responses.websocket_url:
        return responses.websocket_url
    base = api_base_url(responses, chatgpt=chatgpt)
    scheme, rest = base.split(":", 1)
    return ("wss:" if scheme == "https" else "ws:") + rest + "/responses"
