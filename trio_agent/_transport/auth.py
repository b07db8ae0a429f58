"""Request headers for both transports, from an API key or ChatGPT auth (SPEC sec. 6).

A ChatGPT auth source is the application's code: it may read a file, refresh a token
over HTTP, or fail in any other way. Whatever it raises (an ``Exception``; ``Cancelled``
and other ``BaseException`` pass through untouched) is mapped here, once, into
``AuthenticationError`` with ``error_class="auth_source"`` and the original as
``__cause__``, so a broken login fails the warmup or the turn instead of crashing the
agent's nursery (issue 7, bug 6). A snapshot whose token or account id cannot go into
an HTTP header (empty, whitespace, control characters) is refused the same way. No
message ever contains the token.
"""

from __future__ import annotations

from .._config import AgentConfig, ChatGptAuth, ChatGptAuthSnapshot
from .._errors import AuthenticationError

__all__ = ["VERSION", "https_headers", "recover_unauthorized", "websocket_headers"]

VERSION = "0.1.0"

Headers = list[tuple[str, str]]

_LOG_IN_AGAIN = "log in to ChatGPT again (or pass an API key as auth=) and retry"


def _describe(exc: Exception, secret: str | None) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if secret:
        text = text.replace(secret, "<redacted>")
    return text


def _header_safe(value: str) -> bool:
    """Visible ASCII only: anything else would break (or smuggle) an HTTP header."""
    return bool(value) and all(33 <= ord(ch) <= 126 for ch in value)


def _checked(snapshot: object) -> ChatGptAuthSnapshot:
    if not isinstance(snapshot, ChatGptAuthSnapshot):
        raise AuthenticationError(
            f"the ChatGPT auth source's snapshot() returned a {type(snapshot).__name__}, not a "
            f"ta.ChatGptAuthSnapshot; fix the source, or {_LOG_IN_AGAIN}",
        )
    if not isinstance(snapshot.token, str) or not _header_safe(snapshot.token):
        raise AuthenticationError(
            "the ChatGPT auth source returned an empty token or one with whitespace or control "
            f"characters; {_LOG_IN_AGAIN}",
        )
    account = snapshot.account_id
    if account is not None and (not isinstance(account, str) or not _header_safe(account)):
        raise AuthenticationError(
            "the ChatGPT auth source returned an account id with whitespace or control "
            f"characters; {_LOG_IN_AGAIN}",
        )
    return snapshot


async def _snapshot(auth: ChatGptAuth) -> ChatGptAuthSnapshot:
    try:
        snapshot: object = await auth.source.snapshot()
    except AuthenticationError:
        raise  # the source already said what failed (e.g. our own Codex login source)
    except Exception as exc:  # the source is user code: any failure is a failed login
        raise AuthenticationError(
            f"the ChatGPT auth source failed to provide a token ({_describe(exc, None)}); {_LOG_IN_AGAIN}",
        ) from exc
    return _checked(snapshot)


async def recover_unauthorized(config: AgentConfig, rejected: ChatGptAuthSnapshot) -> None:
    """Ask the ChatGPT auth source to recover after the server refused ``rejected`` with
    HTTP 401 (the caller asks once, then retries with a fresh snapshot).

    Raises ``AuthenticationError`` (``error_class="auth_source"``) when the source fails,
    and ``TypeError`` when ``config`` does not use ChatGPT auth (a caller bug: API keys
    have nothing to recover). Cancellation passes through.
    """
    auth = config.auth
    if not isinstance(auth, ChatGptAuth):
        raise TypeError("recover_unauthorized() needs a config with ChatGPT auth; an API key cannot recover")
    try:
        await auth.source.recover_unauthorized(rejected)
    except AuthenticationError:
        raise
    except Exception as exc:  # user code, as in _snapshot
        raise AuthenticationError(
            "the server refused the ChatGPT token (HTTP 401) and the auth source failed to recover "
            f"({_describe(exc, rejected.token)}); {_LOG_IN_AGAIN}",
            status=401,
        ) from exc


async def _auth(config: AgentConfig) -> tuple[Headers, ChatGptAuthSnapshot | None]:
    if isinstance(config.auth, ChatGptAuth):
        snapshot = await _snapshot(config.auth)
        headers = [("Authorization", f"Bearer {snapshot.token}")]
        if snapshot.account_id:
            headers.append(("ChatGPT-Account-ID", snapshot.account_id))
        return headers, snapshot
    return [("Authorization", f"Bearer {config.auth}")], None


def _session(config: AgentConfig) -> Headers:
    session = config.session_id
    return [
        ("x-openai-internal-codex-responses-lite", "true"),
        ("session-id", session),
        ("thread-id", session),
        ("x-client-request-id", session),
        ("User-Agent", f"trio-agent/{VERSION}"),
    ]


async def websocket_headers(config: AgentConfig) -> Headers:
    """Handshake headers: auth, the Responses WebSocket beta and the session ids.

    Raises ``AuthenticationError`` when the ChatGPT auth source fails."""
    headers, _ = await websocket_auth(config)
    return headers


async def websocket_auth(config: AgentConfig) -> tuple[Headers, ChatGptAuthSnapshot | None]:
    """``websocket_headers`` and the ChatGPT snapshot they came from (None for API keys)."""
    auth, snapshot = await _auth(config)
    return [
        *auth,
        ("OpenAI-Beta", "responses_websockets=2026-02-06"),
        ("x-responsesapi-include-timing-metrics", "true"),
        *_session(config),
    ], snapshot


async def https_headers(config: AgentConfig) -> tuple[Headers, ChatGptAuthSnapshot | None]:
    """HTTPS request headers, and the ChatGPT snapshot they came from (None for API keys).

    Raises ``AuthenticationError`` when the ChatGPT auth source fails."""
    auth, snapshot = await _auth(config)
    return [*auth, *_session(config)], snapshot
