"""``PendingReply``: a server-to-client request and the connections asked to answer it
(``_connection``'s reader routes each reply here at once; ``_asking`` waits on it)."""

from __future__ import annotations

from typing import Any, Protocol

import trio

from ._jsonrpc import ErrorResponse, RequestId, Response, RpcError

__all__ = ["PendingReply"]


class Connection(Protocol):
    """What a request needs of a connection it was sent to (``_connection.Connection``)."""

    def forget_request(self, request_id: RequestId) -> None: ...

    def notify(self, method: str, params: Any) -> None: ...


class PendingReply:
    """A server-to-client request, possibly sent to several connections; the first
    answer wins. ``wait()`` returns the ``result`` or raises ``RpcError``."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self._done = trio.Event()
        self._asked: dict[Connection, RequestId] = {}
        self._result: Any = None
        self._error: RpcError | None = None

    @property
    def asked(self) -> int:
        return len(self._asked)

    def sent_to(self, conn: Connection, request_id: RequestId) -> None:
        self._asked[conn] = request_id

    def answered(self, conn: Connection, message: Response | ErrorResponse) -> None:
        if self._done.is_set():
            return
        self._asked.pop(conn, None)
        if isinstance(message, Response):
            self._result = message.result
        else:
            self._error = RpcError(message.message or "the client answered with an error", code=message.code)
        self._done.set()
        self._resolved_elsewhere()

    def gone(self, conn: Connection) -> None:
        self._asked.pop(conn, None)
        if not self._asked and not self._done.is_set():
            self._error = RpcError("every client asked to answer this request went away before answering")
            self._done.set()

    def abandon(self) -> None:
        """Nobody waits for the answer any more (the turn was cancelled)."""
        if not self._done.is_set():
            self._error = RpcError("abandoned")
            self._done.set()
        self._resolved_elsewhere()

    def _resolved_elsewhere(self) -> None:
        for conn, request_id in list(self._asked.items()):
            conn.forget_request(request_id)
            conn.notify("serverRequest/resolved", {"threadId": self.thread_id, "requestId": request_id})
        self._asked.clear()

    async def wait(self) -> Any:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result
