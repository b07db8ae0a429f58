"""The auth values ``AgentConfig(auth=...)`` takes besides an API key: ``ChatGptAuth``,
the token snapshot it sends and the protocol of its token source.

Values only. The one source the package ships, a Codex login (``_codex_login.py``),
sits above this layer; ``ChatGptAuth.from_codex_home`` reaches it through
``links.py``, which the package face fills in.
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Protocol

import attrs

from .links import linked

__all__ = ["ChatGptAuth", "ChatGptAuthSnapshot", "ChatGptAuthSource", "redact"]


def redact(secret: object) -> str:
    """What a repr shows instead of a secret: its kind and length, never a character."""
    if isinstance(secret, str):
        return f"<redacted {len(secret)} characters>"
    return f"<{type(secret).__name__}>"


@attrs.frozen
class ChatGptAuthSnapshot:
    """A bearer token and the ChatGPT account it belongs to (``repr`` hides the token)."""

    token: str = attrs.field(repr=redact)
    account_id: str | None = None


class ChatGptAuthSource(Protocol):
    """What ``ChatGptAuth`` needs from its source (SPEC sec. 1)."""

    def validate(self) -> None: ...

    def snapshot(self) -> Awaitable[ChatGptAuthSnapshot]: ...

    def recover_unauthorized(self, rejected: ChatGptAuthSnapshot) -> Awaitable[None]: ...


@attrs.frozen
class ChatGptAuth:
    """ChatGPT subscription authentication backed by a token source (``repr`` names the
    source's type only: a source may hold tokens)."""

    source: ChatGptAuthSource = attrs.field(repr=redact)

    @staticmethod
    def from_codex_home(codex_home: str | Path | None = None, *, token_url: str | None = None) -> str | ChatGptAuth:
        """The credential of an existing Codex login (``$CODEX_HOME/auth.json``, else
        ``~/.codex/auth.json``), for ``AgentConfig(auth=...)``: its API key in API-key
        mode, else a ``ChatGptAuth`` that sends the login's token and account id,
        refreshes an expiring token (and recovers once after a 401) at Codex's token
        endpoint (``token_url`` overrides it) and writes refreshed tokens back
        atomically. ``ConfigError`` when the file is missing or malformed."""
        credential = linked().from_codex_home(codex_home, token_url)
        assert isinstance(credential, str | ChatGptAuth)
        return credential
