"""``RemoteApi``: JSON POSTs to the Responses API host for the remote tools.

``web__run`` and ``image_gen__imagegen`` call ``{api_base_url}/...`` with the same
auth headers as the model calls (``_transport.auth.https_headers``: the API key or
the ChatGPT token and account id, and the session headers); a 401 with ChatGPT auth
asks the auth source to recover once and resends. The HTTP client is the
application's ``Responses.http_client`` when given, else one owned here (created on
first use, so ``httpx`` is imported only then) that dials through ``Responses.dialer``
when set -- the in-memory test seam -- and is closed with the agent's tools.

Bodies are read up to a limit (``RemoteError`` beyond it): nothing here buffers an
unbounded response. Transport failures become ``RemoteError`` with ``retryable``
set for connection problems and timeouts; callers decide whether to retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from .._errors import AuthenticationError
from .._jsontext import dumps

if TYPE_CHECKING:
    import httpx

    from .._config import AgentConfig

__all__ = ["RemoteApi", "RemoteError", "RemoteResponse"]

_PREVIEW = 500


class RemoteError(Exception):
    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@attrs.frozen
class RemoteResponse:
    status: int
    body: bytes

    def preview(self) -> str:
        text = self.body[:_PREVIEW].decode("utf-8", "replace")
        return text + ("…" if len(self.body) > _PREVIEW else "")


class RemoteApi:
    def __init__(self, config: AgentConfig) -> None:
        self._config = config
        self.base_url = config.api_base_url
        self.session_id = config.session_id
        self.model = config.model
        self._client: httpx.AsyncClient | None = None
        self._owned = False

    def _http(self) -> httpx.AsyncClient:
        if self._client is not None:
            return self._client
        import httpx

        responses = self._config.responses
        if responses.http_client is not None:
            self._client = responses.http_client
            return self._client
        from .._transport.https import _ssl_context

        timeout = httpx.Timeout(connect=responses.connect_timeout, read=300.0, write=30.0,
                                pool=responses.connect_timeout)
        context = responses.ssl_context or _ssl_context()
        if responses.dialer is None:
            self._client = httpx.AsyncClient(timeout=timeout, verify=context)
        else:
            from .._transport._dialed_http import DialedTransport

            self._client = httpx.AsyncClient(
                timeout=timeout, transport=DialedTransport(responses.dialer, ssl_context=context)
            )
        self._owned = True
        return self._client

    async def post_json(self, path: str, body: dict[str, Any], *, limit: int) -> RemoteResponse:
        """POST ``body`` to ``{api_base_url}{path}``; the response (any status) with its
        body read up to ``limit`` bytes. Raises ``RemoteError``."""
        from .._config import ChatGptAuth
        from .._transport.auth import https_headers, recover_unauthorized

        content = dumps(body).encode()
        try:
            headers, snapshot = await https_headers(self._config)
            response = await self._send(path, content, headers, limit)
            if response.status == 401 and isinstance(self._config.auth, ChatGptAuth) and snapshot is not None:
                await recover_unauthorized(self._config, snapshot)
                headers, _ = await https_headers(self._config)
                response = await self._send(path, content, headers, limit)
        except AuthenticationError as exc:
            raise RemoteError(str(exc), retryable=False) from None
        return response

    async def _send(self, path: str, content: bytes, headers: list[tuple[str, str]], limit: int) -> RemoteResponse:
        import httpx

        url = self.base_url.rstrip("/") + path
        request_headers = [("Content-Type", "application/json"), ("Accept", "application/json"), *headers]
        try:
            async with self._http().stream("POST", url, content=content, headers=request_headers) as response:
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    raise RemoteError(f"the response from {url} is over the {limit}-byte limit", retryable=False)
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > limit:
                        raise RemoteError(f"the response from {url} is over the {limit}-byte limit", retryable=False)
                return RemoteResponse(response.status_code, bytes(data))
        except httpx.TimeoutException as exc:
            raise RemoteError(f"the request to {url} timed out ({type(exc).__name__})", retryable=True) from None
        except httpx.TransportError as exc:
            raise RemoteError(f"the request to {url} failed: {type(exc).__name__}: {exc}", retryable=True) from None

    async def aclose(self) -> None:
        if self._client is not None and self._owned:
            await self._client.aclose()
        self._client = None
