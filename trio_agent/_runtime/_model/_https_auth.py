"""The headers of an agent's HTTPS requests, and their recovery from a 401.

``HttpsAuth.credentials`` gives one attempt its headers: with an API key the same list
every time (computed once: the transport then reuses the ``httpx.Headers`` it built
from it), with ChatGPT auth fresh from the auth source each attempt (a token may have
been refreshed), with the snapshot they came from. A 401 answer to a request sent with
a ChatGPT snapshot asks the source to recover that snapshot (``recover``), once per
attempt (``HttpsRoute.recovered``); the attempt then sends again with new headers. Every
token used is added to the agent's ``Redactor``. The WebSocket's equivalent runs at the
handshake (``_connections``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._transport.auth import https_headers, recover_unauthorized

if TYPE_CHECKING:
    from ..._config import AgentConfig, ChatGptAuthSnapshot
    from .._secrets import Redactor

__all__ = ["Credentials", "HttpsAuth"]

Headers = list[tuple[str, str]]
Credentials = tuple[Headers, "ChatGptAuthSnapshot | None"]  # the headers, and their ChatGPT snapshot


class HttpsAuth:
    def __init__(self, config: AgentConfig, redactor: Redactor) -> None:
        self._config = config
        self._redactor = redactor
        self._static: Headers | None = None  # an API key's headers, computed once

    async def credentials(self) -> Credentials:
        """This attempt's headers (``AuthenticationError`` when the auth source fails)."""
        if self._static is not None:
            return self._static, None
        headers, snapshot = await https_headers(self._config)
        if snapshot is None:
            self._static = headers
        self._redactor.add(snapshot.token if snapshot is not None else None)
        return headers, snapshot

    async def recover(self, rejected: ChatGptAuthSnapshot) -> Credentials:
        """After a 401 to a request sent with ``rejected``: the source recovers, and the
        new headers."""
        await recover_unauthorized(self._config, rejected)
        headers, snapshot = await https_headers(self._config)
        self._redactor.add(snapshot.token if snapshot is not None else None)
        return headers, snapshot
