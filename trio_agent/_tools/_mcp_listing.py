"""Each entry of an MCP server's ``tools/list`` checked on its own.

The SDK validates a ``tools/list`` result as a whole, so one malformed entry (a
missing name, an ``inputSchema`` that is not an object, a field of the wrong type)
fails the whole listing and, with it, every tool of that server. ``ToolListing``
wraps the server's transport -- the SDK's public seam for custom transports -- and
looks at the results of the ``tools/list`` requests going through it: a page that the
SDK would accept passes untouched; otherwise each entry is validated alone, against
the same models the SDK applies (the negotiated protocol version's wire schema, then
its own ``ListToolsResult``), and the entries that fail are taken out of the page and
kept in ``skipped`` with the reason, for the agent to report. The SDK then sees, caches
and calls only the good tools; nothing of its internals is touched.

The negotiated version is read from the ``initialize`` result on its way through.
At most ``_PENDING`` requests are watched at a time (one a listing page, and the
``initialize``); a request that is never answered is forgotten when newer ones push it
out.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Self

import attrs

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams
    from mcp.shared.message import SessionMessage

__all__ = ["SkippedTool", "ToolListing"]

_PENDING = 64
_WATCHED = ("initialize", "tools/list")


@attrs.frozen
class SkippedTool:
    index: int  # the entry's position in the server's whole listing, from 0
    name: str | None  # its "name", when that is a string
    reason: str


def _problem(entries: list[Any], version: str | None) -> str | None:
    """Why the SDK would refuse ``{"tools": entries}`` (None: it would accept it)."""
    from mcp_types import ListToolsResult, methods
    from pydantic import ValidationError

    page = {"tools": entries}
    try:
        if version is not None and ("tools/list", version) in methods.SERVER_RESULTS:
            methods.validate_server_result("tools/list", version, page)
        ListToolsResult.model_validate(page, by_name=False)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"][2:])  # past ("tools", <index>)
        return f"{where + ': ' if where else ''}{error['msg']}"
    return None


class ToolListing:
    """See the module docstring; ``wrap(transport)`` is the transport to give the SDK."""

    def __init__(self) -> None:
        self.skipped: list[SkippedTool] = []
        self._pending: collections.OrderedDict[object, str] = collections.OrderedDict()
        self._version: str | None = None
        self._seen = 0  # entries of earlier pages

    @asynccontextmanager
    async def wrap(self, transport: AbstractAsyncContextManager[TransportStreams]) -> AsyncIterator[TransportStreams]:
        async with transport as (read, write):
            yield _Reader(read, self), _Writer(write, self)

    def sent(self, item: SessionMessage) -> None:
        method = getattr(item.message, "method", None)
        if method in _WATCHED and hasattr(item.message, "id"):
            self._pending[item.message.id] = method
            while len(self._pending) > _PENDING:
                self._pending.popitem(last=False)

    def received(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        message = getattr(item, "message", None)
        if message is None or not hasattr(message, "id") or hasattr(message, "method"):
            return item  # a notification, or a request of the server's (its ids are its own)
        method = self._pending.pop(message.id, None)
        result = getattr(message, "result", None)
        if method is None or not isinstance(result, dict):
            return item
        if method == "initialize":
            version = result.get("protocolVersion")
            self._version = version if isinstance(version, str) else None
            return item
        entries = result.get("tools")
        if not isinstance(entries, list):
            return item  # the page itself is malformed: the SDK refuses it, and says why
        first, self._seen = self._seen, self._seen + len(entries)
        if _problem(entries, self._version) is None:
            return item
        kept = []
        for index, entry in enumerate(entries, start=first):
            problem = _problem([entry], self._version)
            if problem is None:
                kept.append(entry)
            else:
                name = entry.get("name") if isinstance(entry, dict) else None
                self.skipped.append(SkippedTool(index, name if isinstance(name, str) else None, problem))
        from mcp.shared.message import SessionMessage

        assert isinstance(item, SessionMessage)
        return SessionMessage(message.model_copy(update={"result": {**result, "tools": kept}}), item.metadata)


class _Wrapped:
    """A transport stream: the lifecycle passes through."""

    def __init__(self, inner: Any, listing: ToolListing) -> None:
        self._inner = inner
        self._listing = listing

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc_info)
        return result


class _Reader(_Wrapped):
    """The transport's read stream, each message seen by ``ToolListing.received``."""

    @property
    def last_context(self) -> Any:  # the SDK's dispatcher reads it (duck-typed) when present
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        return self._listing.received(await self._inner.receive())

    def __aiter__(self) -> _Reader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        return self._listing.received(await self._inner.__anext__())


class _Writer(_Wrapped):
    """The transport's write stream, each message seen by ``ToolListing.sent``."""

    async def send(self, item: SessionMessage, /) -> None:
        self._listing.sent(item)
        await self._inner.send(item)
