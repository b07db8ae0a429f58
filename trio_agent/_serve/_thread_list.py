"""``thread/list``: the durable threads under the server's home, filtered and paged.

Theory of operation. Every thread with a rollout is a candidate (ephemeral threads have
none); its view is the loaded thread's or its record's. The filters say what they say
about this server's threads, none is ignored:

- ``archived``: true lists only archived threads, false or null only the others;
- ``cwd`` (a path or paths), ``searchTerm`` (in the preview or the name, any case),
  ``modelProviders`` (empty: all), ``originators`` (the client that started it);
- ``sourceKinds``: a root thread is ``appServer``, a child thread (``--multi-agent``)
  ``subAgentThreadSpawn``; omitted or empty means the interactive kinds, so child
  threads are listed only when asked for (codex's default) -- or when a parent or an
  ancestor is named, which only child threads have;
- ``parentThreadId`` (direct children) and ``ancestorThreadId`` (descendants at any
  depth, not the ancestor itself);
- ``includedThreadIds`` / ``excludedThreadIds`` (at most 100 ids each);
- ``sectionId`` / ``projectId``: this server has no sections or projects, so a thread is
  in neither: ``null`` matches every thread, an id none.

``currentAccountOnly`` changes nothing (the server has one account, and every thread is
its). Sorted by ``sortKey`` (``created_at``, the default and what ``section_position``
means without sections; ``updated_at``; ``recency_at``), newest first unless
``sortDirection: "asc"``; paged by ``limit``/``cursor``; ties (equal times) newest
rollout first.

Where the threads come from: an unloaded thread's row in the thread index
(``_thread_index``: SQLite, read in a worker thread, checked against the thread's
files), a loaded thread's view from memory, merged in the same order. A thread whose
record or rollout is damaged is left out (``thread/read`` says what is wrong with it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ._connection import Connection, Reply
from ._index_db import Query
from ._index_files import CHILD, ROOT
from ._jsonrpc import InvalidParams
from ._params import Params, shown
from ._shapes import ThreadMeta
from ._thread_index import Shown
from ._thread_methods import loaded, page_bounds

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ["METHODS"]

Json = dict[str, Any]
MAX_IDS = 100
_INTERACTIVE = frozenset({"cli", "vscode", "exec", "appServer"})
_KINDS = frozenset({*_INTERACTIVE, "subAgent", "subAgentReview", "subAgentCompact", "subAgentThreadSpawn",
                    "subAgentOther", "unknown"})
_SORT_KEYS = {"created_at": "createdAt", "updated_at": "updatedAt", "recency_at": "recencyAt",
              "section_position": "createdAt"}
_COLUMNS = {"createdAt": "created", "updatedAt": "updated", "recencyAt": "updated"}


def _strings(params: Params, name: str, *, limit: int | None = None) -> frozenset[str] | None:
    values = params.opt_list(name)
    if values is None:
        return None
    if not all(isinstance(value, str) for value in values) or (limit is not None and len(values) > limit):
        bound = f" of at most {limit}" if limit is not None else ""
        raise InvalidParams(f"thread/list: `{name}` must be an array{bound} of strings or null, got {shown(values)}")
    return frozenset(values)


def _cwds(params: Params) -> frozenset[str] | None:
    value = params.get("cwd")
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list) and all(isinstance(cwd, str) for cwd in value):
        return frozenset(value)
    raise InvalidParams(f"thread/list: `cwd` must be a path, an array of paths or null, got {shown(value)}")


def _kinds(params: Params) -> frozenset[str]:
    kinds = _strings(params, "sourceKinds")
    if kinds and not kinds <= _KINDS:
        raise InvalidParams(f"thread/list: `sourceKinds` must name source kinds ({', '.join(sorted(_KINDS))}), "
                            f"got {shown(sorted(kinds))}")
    if kinds:
        return kinds
    family = params.get("parentThreadId") is not None or params.get("ancestorThreadId") is not None
    return _KINDS if family else _INTERACTIVE


def _nowhere(params: Params) -> bool:
    """A section or project was named: no thread here is in one."""
    for name in ("sectionId", "projectId"):
        params.opt_string(name)
        if params.get(name) is not None:
            return True
    return False


@attrs.frozen
class ListFilter:
    archived: bool
    cwds: frozenset[str] | None
    search: str
    providers: frozenset[str] | None
    originators: frozenset[str] | None
    kinds: frozenset[str]
    parent: str | None
    ancestor: str | None
    included: frozenset[str] | None
    excluded: frozenset[str]
    nowhere: bool

    @classmethod
    def of(cls, params: Params) -> ListFilter:
        return cls(
            archived=params.opt_bool("archived") or False, cwds=_cwds(params),
            search=(params.opt_string("searchTerm") or "").lower(), providers=_strings(params, "modelProviders"),
            originators=_strings(params, "originators") or None, kinds=_kinds(params),
            parent=params.opt_string("parentThreadId"), ancestor=params.opt_string("ancestorThreadId"),
            included=_strings(params, "includedThreadIds", limit=MAX_IDS),
            excluded=_strings(params, "excludedThreadIds", limit=MAX_IDS) or frozenset(), nowhere=_nowhere(params),
        )

    def keeps(self, view: Json, meta: ThreadMeta) -> bool:
        """Whether a loaded thread is listed, but for ``ancestor`` (the index knows the family)."""
        kind = CHILD if meta.parent_thread_id is not None else ROOT
        return not (
            self.nowhere or meta.archived != self.archived or kind not in self.kinds
            or (self.cwds is not None and view["cwd"] not in self.cwds)
            or (self.search and self.search not in view["preview"].lower()
                and self.search not in (meta.name or "").lower())
            or (self.providers and view["modelProvider"] not in self.providers)
            or (self.originators is not None and meta.originator not in self.originators)
            or (self.parent is not None and meta.parent_thread_id != self.parent)
            or (self.included is not None and meta.thread_id not in self.included)
            or meta.thread_id in self.excluded
        )

    def query(self, *, loaded: list[str], column: str, descending: bool, limit: int, provider: str) -> Query:
        def listed(values: frozenset[str] | None) -> list[str] | None:
            return sorted(values) if values is not None else None

        return Query(
            archived=self.archived, kinds=[kind for kind in (ROOT, CHILD) if kind in self.kinds],
            cwds=listed(self.cwds), search=self.search, providers=listed(self.providers or None),
            originators=listed(self.originators), parent=self.parent, ancestor=self.ancestor,
            included=listed(self.included), excluded=sorted(self.excluded), loaded=loaded, sort=column,
            descending=descending, limit=limit, server_provider=provider,
        )


def _loaded(server: ServerContext, wanted: ListFilter, key: str) -> tuple[list[str], list[Shown]]:
    """Every loaded thread's id, and those of them with a rollout that ``wanted`` keeps."""
    ids: list[str] = []
    kept: list[Shown] = []
    for thread_id in server.threads.loaded():
        state = loaded(server, thread_id)
        if state is None:
            continue
        ids.append(thread_id)
        rollout = state.agent.rollout if state.agent is not None else None
        if rollout is None or state.meta.ephemeral:  # not a durable thread: never listed
            continue
        view = server.thread_view(state, turns=False)
        if wanted.keeps(view, state.meta):
            kept.append(Shown(view, view[key] or 0, "/".join(rollout.path.parts[-4:])))
    return ids, kept


async def thread_list(server: ServerContext, conn: Connection, params: Params) -> Reply:
    wanted = ListFilter.of(params)
    sort_key = params.opt_string("sortKey") or "created_at"
    if sort_key not in _SORT_KEYS:
        raise InvalidParams(f"thread/list: `sortKey` must be one of {', '.join(_SORT_KEYS)} or null, "
                            f"got {shown(sort_key)}")
    key = _SORT_KEYS[sort_key]
    start, end = page_bounds(params)
    if wanted.nowhere or not {ROOT, CHILD} & wanted.kinds:
        return Reply({"data": [], "nextCursor": None, "backwardsCursor": None})
    ids, kept = _loaded(server, wanted, key)
    query = wanted.query(loaded=ids, column=_COLUMNS[key], descending=params.opt_string("sortDirection") != "asc",
                         limit=end + 1, provider=server.model_provider)
    found = await server.index.page(query, kept, start)
    return Reply({"data": found.views, "nextCursor": str(end) if found.more else None, "backwardsCursor": None})


METHODS = {"thread/list": thread_list}
