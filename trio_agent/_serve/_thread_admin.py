"""Thread management beyond the lifecycle: ``thread/name/set``, ``thread/archive``,
``thread/unarchive`` and ``thread/turns/list``.

Theory of operation (issue 22). A thread's name and archived flag are settings in its
record (``ThreadMeta.name``/``archived``, one more ``meta`` line in ``_store``), so they
survive unload and restart; they work on loaded and unloaded threads alike (an
ephemeral thread keeps its name in memory and cannot be archived: it is never listed).
``Thread.name`` shows the name in every thread view; ``thread/list`` leaves archived
threads out unless it asks for them (``archived: true``: only those) and its
``searchTerm`` also matches names. ``thread/name/updated``, ``thread/archived`` and
``thread/unarchived`` go to every initialized connection, like ``thread/started``:
they describe the thread list. Archiving changes nothing else -- a loaded thread stays
loaded and a resume still works.

``thread/turns/list`` pages a thread's turns (loaded or not), newest first unless
``sortDirection: "asc"``, with ``itemsView`` (default ``summary``). A cursor is the id
of the first turn of the next page, so it stays valid while turns are added;
``backwardsCursor`` is the id of this page's first turn (reversing the direction from it
includes that turn again, as the schema describes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._connection import Connection, Reply
from ._jsonrpc import InvalidParams, InvalidRequest
from ._params import Params, shown
from ._shapes import ThreadMeta, TurnRecord
from ._thread_methods import any_thread_view, loaded, stored_meta

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ["METHODS"]

Json = dict[str, Any]
MAX_NAME_LENGTH = 1024
DEFAULT_TURN_PAGE = 25
MAX_TURN_PAGE = 200
_VIEWS = ("notLoaded", "summary", "full")


def _meta(server: ServerContext, thread_id: str) -> ThreadMeta:
    """The settings to change: the loaded thread's own, else its record's."""
    state = loaded(server, thread_id)
    return state.meta if state is not None else stored_meta(server, thread_id)[0]


def _save(server: ServerContext, meta: ThreadMeta) -> None:
    if not meta.ephemeral:
        server.store.update(meta)


def _name(params: Params) -> str | None:
    value = params.get("name")
    if not isinstance(value, str):
        raise InvalidParams(f"thread/name/set: missing required field `name` (a string), got {shown(value)}")
    name = value.strip()
    if len(name) > MAX_NAME_LENGTH or not name.isprintable():
        raise InvalidParams(f"thread/name/set: `name` must be one line of printable text of at most "
                            f"{MAX_NAME_LENGTH} characters, got {shown(value)}")
    return name or None  # an empty name clears it


async def thread_name_set(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id = params.string("threadId")
    name = _name(params)
    meta = _meta(server, thread_id)
    meta.name = name
    _save(server, meta)
    return Reply({}, after=lambda: server.broadcast("thread/name/updated", {"threadId": thread_id,
                                                                             "threadName": name}))


def _set_archived(server: ServerContext, params: Params, archived: bool) -> tuple[str, bool]:
    thread_id = params.string("threadId")
    meta = _meta(server, thread_id)
    if meta.ephemeral:
        raise InvalidRequest(f"{params.method}: thread {thread_id} is ephemeral; it is never listed, so there is "
                             "nothing to archive")
    changed = meta.archived != archived
    if changed:
        meta.archived = archived
        _save(server, meta)
    return thread_id, changed


async def thread_archive(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id, changed = _set_archived(server, params, True)
    if not changed:
        return Reply({})
    return Reply({}, after=lambda: server.broadcast("thread/archived", {"threadId": thread_id}))


async def thread_unarchive(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id, changed = _set_archived(server, params, False)
    thread = any_thread_view(server, thread_id, turns=False)[0]
    if not changed:
        return Reply({"thread": thread})
    return Reply({"thread": thread}, after=lambda: server.broadcast("thread/unarchived", {"threadId": thread_id}))


def _turns(server: ServerContext, thread_id: str) -> list[TurnRecord]:
    state = loaded(server, thread_id)
    return list(state.mapper.turns) if state is not None else list(stored_meta(server, thread_id)[1])


def _turn_page_params(params: Params) -> tuple[bool, int, str]:
    direction = params.opt_string("sortDirection") or "desc"
    if direction not in ("asc", "desc"):
        raise InvalidParams(f"thread/turns/list: `sortDirection` must be \"asc\", \"desc\" or null, "
                            f"got {shown(direction)}")
    view = params.opt_string("itemsView") or "summary"
    if view not in _VIEWS:
        raise InvalidParams(f"thread/turns/list: `itemsView` must be one of {', '.join(_VIEWS)} or null, "
                            f"got {shown(view)}")
    limit = params.opt_int("limit") or DEFAULT_TURN_PAGE
    return direction == "desc", min(limit, MAX_TURN_PAGE), view


async def thread_turns_list(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id = params.string("threadId")
    newest_first, limit, view = _turn_page_params(params)
    turns = _turns(server, thread_id)
    if newest_first:
        turns.reverse()
    cursor = params.opt_string("cursor")
    start = 0
    if cursor:
        ids = [turn.id for turn in turns]
        if cursor not in ids:
            raise InvalidParams(f"thread/turns/list: `cursor` {shown(cursor)} names no turn of thread {thread_id}; "
                                "pass a cursor from an earlier answer (or none for the first page)")
        start = ids.index(cursor)
    page = turns[start:start + limit]
    following = turns[start + limit] if start + limit < len(turns) else None
    return Reply({
        "data": [turn.to_json(view) for turn in page],
        "nextCursor": following.id if following is not None else None,
        "backwardsCursor": page[0].id if page else None,
    })


METHODS = {
    "thread/name/set": thread_name_set,
    "thread/archive": thread_archive,
    "thread/unarchive": thread_unarchive,
    "thread/turns/list": thread_turns_list,
}
