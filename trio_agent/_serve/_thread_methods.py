"""``thread/*`` methods: start, resume (warm or cold), fork, read, loaded/list,
unsubscribe, inject_items, compact/start (listing: ``_thread_list``; names, archiving
and turn pages: ``_thread_admin``; rollback: ``_rollback``).

Threads are the thread manager's: the id is the agent's session id (UUIDv7), the
rollout lives under the server's home. ``thread/start``, ``thread/resume`` and
``thread/fork`` subscribe the caller. The state of a thread being loaded is created
inside ``configure`` (which the manager calls with the new thread's id before its
agent exists), so no event of the new agent can arrive before the server knows it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._rollout import read_history
from .._session.snapshot import SessionSnapshot
from .._threads import ThreadError, ThreadStatus
from .._tools._sandbox import SandboxUnavailable
from ._connection import Connection, Reply
from ._dynamic import parse_dynamic_tools
from ._jsonrpc import InvalidParams, InvalidRequest
from ._params import Params, seconds, shown
from ._permissions import parse_approval, parse_sandbox_mode, unavailable
from ._restore import record_restored, restored_turns
from ._reviewer import parse_reviewer
from ._shapes import ThreadMeta, TurnRecord, thread_json

if TYPE_CHECKING:
    from .._config import AgentConfig
    from ._context import ServerContext
    from ._thread_state import ThreadState

__all__ = ["METHODS"]

Json = dict[str, Any]
DEFAULT_PAGE = 25
MAX_PAGE = 200


def _workspace(server: ServerContext, cwd: str | None, method: str) -> str:
    if cwd is None:
        return os.path.realpath(server.config.resolved_workspace())
    path = Path(cwd)
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.is_dir():
        raise InvalidParams(f"{method}: `cwd` {cwd!r} is not a directory; pass an existing directory (or omit it)")
    return os.path.realpath(path)


def _unload_delay(params: Params) -> float | None:
    overrides = params.opt_object("config") or {}
    value = overrides.get("thread_unload_delay_secs")
    if value is None:
        return None
    delay = seconds(value)
    if delay is None:
        raise InvalidParams(f"{params.method}: config.thread_unload_delay_secs must be a number of seconds >= 0, "
                            f"got {shown(value)}")
    return delay


def _permissions(params: Params) -> Json:
    """The ``sandbox``/``approvalPolicy``/``approvalsReviewer`` a thread asks for, as
    ``ThreadMeta`` fields (absent: none, the server's configuration or what the thread
    had stays)."""
    fields: Json = {}
    sandbox = parse_sandbox_mode(params)
    if sandbox is not None:
        fields["sandbox"] = sandbox
    policy = parse_approval(params)
    if policy is not None:
        fields["approval_policy"] = policy.value
    reviewer = parse_reviewer(params)
    if reviewer is not None:
        fields["approvals_reviewer"] = reviewer
    return fields


@contextmanager
def _dropped_if_failed(server: ServerContext, states: list[ThreadState], method: str) -> Iterator[None]:
    """A load that fails forgets the states its ``configure`` made; a sandbox the machine
    cannot provide is said in protocol terms."""
    try:
        yield
    except BaseException as exc:
        for state in states:
            server.drop_state(state)
        if isinstance(exc, SandboxUnavailable):
            raise unavailable(method, exc) from None
        raise


def _instructions(params: Params) -> str | None:
    base = params.opt_string("baseInstructions")
    developer = params.opt_string("developerInstructions")
    if developer is None:
        return base or None
    from .._session.context import DEFAULT_INSTRUCTIONS

    return f"{base or DEFAULT_INSTRUCTIONS}\n\n{developer}"


async def thread_start(server: ServerContext, conn: Connection, params: Params) -> Reply:
    ephemeral = params.opt_bool("ephemeral") or False
    specs = parse_dynamic_tools(params.opt_list("dynamicTools"))
    meta_args: Json = {
        "cwd": _workspace(server, params.opt_string("cwd"), params.method),
        "model": params.opt_string("model") or server.config.model,
        "model_provider": server.model_provider, "ephemeral": ephemeral,
        "dynamic_tools": [spec.to_json() for spec in specs], "instructions": _instructions(params),
        "originator": conn.client_name, **_permissions(params),
    }
    delay = _unload_delay(params)
    states: list[ThreadState] = []

    def configure(config: AgentConfig) -> AgentConfig:
        meta = ThreadMeta(config.session_id, created_at=server.clock.now_s(), **meta_args)
        server.index.claim(meta.thread_id)  # before its agent writes the rollout
        state = server.new_state(meta, specs=specs)
        states.append(state)
        state.subscribers.add(conn)
        return server.configure(state, config, workspace=meta.cwd)

    with _dropped_if_failed(server, states, params.method):
        agent = await server.threads.start(ephemeral=ephemeral, unload_delay=delay, configure=configure,
                                               subscriber=conn)
    state = states[0]
    state.agent = agent
    if not ephemeral:
        server.store.create(state.meta)
    thread = server.thread_view(state, turns=True)
    return Reply(server.settings_view(state, thread),
                 after=lambda: server.broadcast("thread/started", {"thread": thread}))


async def thread_resume(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id = params.string("threadId")
    exclude_turns = params.opt_bool("excludeTurns") or False
    threads = server.threads
    state = server.state(thread_id)
    cold = threads.agent(thread_id) is None or state is None
    if not cold:
        assert state is not None
        await threads.resume(thread_id, subscriber=conn)
        state.subscribers.add(conn)
    else:
        state = await _load_cold(server, conn, thread_id, _permissions(params))
    thread = server.thread_view(state, turns=not exclude_turns)
    reply = server.settings_view(state, thread)
    usage = state.mapper.usage_total
    last_turn = state.mapper.turns[-1].id if state.mapper.turns else None
    if not cold or usage is None or last_turn is None:
        return Reply(reply)
    # codex.md 7.4: a cold resume replays the persisted token usage right after the response.
    token_usage = {"total": usage, "last": usage, "modelContextWindow": state.mapper.window}
    return Reply(reply, after=lambda: conn.notify("thread/tokenUsage/updated", {
        "threadId": thread_id, "turnId": last_turn, "tokenUsage": token_usage}))


def stored_meta(server: ServerContext, thread_id: str, *, with_turns: bool = True,
                ) -> tuple[ThreadMeta, list[Any], Json | None]:
    """What the server knows of an unloaded thread: its record, else what its rollout
    says. Its turns end with the one a killed server left (``_restore``) unless
    ``with_turns=False`` (the caller shows no turns: the rollout is not read)."""
    meta, turns, usage, _ = _stored_meta(server, thread_id, with_turns=with_turns)
    return meta, turns, usage


def _stored_meta(server: ServerContext, thread_id: str, *, with_turns: bool,
                 ) -> tuple[ThreadMeta, list[Any], Json | None, list[TurnRecord]]:
    """``stored_meta``, and which of its turns are restored (``_restore``)."""
    stored = server.store.load(thread_id)
    if stored is not None:
        restored = restored_turns(server, thread_id, stored) if with_turns else []
        turns = [*stored.turns, *restored]
        meta = stored.meta
        if turns and meta.updated_at is None:
            meta.updated_at = (turns[-1].completed_at_ms or 0) // 1000 or None
        return meta, turns, stored.usage_total, restored
    try:
        path = server.index.rollouts.find(thread_id)
    except Exception as exc:  # an id that cannot name a rollout
        raise InvalidRequest(f"thread not found: {thread_id} ({exc})") from exc
    if path is None:
        raise InvalidRequest(f"thread not found: {thread_id}; no rollout under {server.home}")
    rollout_meta, _history = read_history(path)
    rollout_meta = rollout_meta or {}
    created = int(path.stat().st_mtime)
    meta = ThreadMeta(thread_id, created_at=created, cwd=str(rollout_meta.get("cwd") or ""),
                      model=str(rollout_meta.get("model") or server.config.model),
                      model_provider=server.model_provider,
                      instructions=None)
    return meta, [], None, []


async def _load_cold(server: ServerContext, conn: Connection, thread_id: str, permissions: Json) -> ThreadState:
    """Load ``thread_id`` from its rollout; ``permissions`` (``sandbox``/``approvalPolicy``
    of the request) override what the thread had, as codex's cold resume does."""
    if server.threads.is_ephemeral(thread_id):
        raise InvalidRequest(f"cannot resume the ephemeral thread {thread_id}: it was unloaded and kept no rollout")
    meta, turns, usage, restored = _stored_meta(server, thread_id, with_turns=True)
    if meta.parent_thread_id is not None:  # a child thread: its parent's agent reloads it
        return await server.children.resume(conn, meta)
    changed = any(getattr(meta, name) != value for name, value in permissions.items())
    for name, value in permissions.items():
        setattr(meta, name, value)
    states: list[ThreadState] = []

    def configure(config: AgentConfig) -> AgentConfig:
        state = server.new_state(meta, turns=turns, usage_total=usage)
        states.append(state)
        state.subscribers.add(conn)
        return server.configure(state, config)

    with _dropped_if_failed(server, states, "thread/resume"):
        agent = await server.threads.resume(thread_id, subscriber=conn, configure=configure)
    if states and changed and not meta.ephemeral:
        server.store.update(meta)
    if not states:  # another client's cold resume was loading it: this one shared that load
        shared = server.state(thread_id)
        if shared is None:
            raise InvalidRequest(f"thread {thread_id} closed while it was being resumed; retry thread/resume")
        shared.agent = agent
        shared.subscribers.add(conn)
        return shared
    state = states[0]
    state.agent = agent
    record_restored(server, state, agent, restored)
    return state


async def thread_fork(server: ServerContext, conn: Connection, params: Params) -> Reply:
    source_id = params.string("threadId")
    ephemeral = params.opt_bool("ephemeral") or False
    threads = server.threads
    if threads.status(source_id) is ThreadStatus.ACTIVE:
        raise InvalidRequest(f"thread {source_id} is running a turn; fork it after its turn/completed "
                             "(or turn/interrupt it first)")
    try:
        history = list(threads.read(source_id).history)
    except ThreadError as exc:
        raise InvalidRequest(f"cannot fork thread {source_id}: {exc}") from exc
    if not history:
        raise InvalidRequest(f"thread {source_id} has no history to fork yet; run a turn on it first")
    permissions = _permissions(params)
    source = server.state(source_id)
    source_meta, source_turns, _ = (source.meta, source.mapper.turns, None) if source else stored_meta(
        server, source_id)
    snapshot = SessionSnapshot(model=source_meta.model, lineage_id=source_id, prompt_cache_key=source_id,
                               workspace=source_meta.cwd, request_prefix=[], history=history)
    states: list[ThreadState] = []

    def configure(config: AgentConfig) -> AgentConfig:
        meta = ThreadMeta(config.session_id, created_at=server.clock.now_s(), cwd=source_meta.cwd,
                          model=source_meta.model, model_provider=server.model_provider, ephemeral=ephemeral,
                          forked_from=source_id, dynamic_tools=list(source_meta.dynamic_tools),
                          instructions=source_meta.instructions, originator=conn.client_name,
                          preview=source_meta.preview,
                          **{"sandbox": source_meta.sandbox, "approval_policy": source_meta.approval_policy,
                             "approvals_reviewer": source_meta.approvals_reviewer, **permissions})
        server.index.claim(meta.thread_id)  # before its agent writes the rollout
        state = server.new_state(meta, turns=source_turns)
        states.append(state)
        state.subscribers.add(conn)
        return server.configure(state, config, resume=snapshot, workspace=meta.cwd)

    with _dropped_if_failed(server, states, params.method):
        agent = await threads.start(ephemeral=ephemeral, configure=configure, subscriber=conn)
    state = states[0]
    state.agent = agent
    if not ephemeral:
        server.store.create(state.meta, state.mapper.turns)
    thread = server.thread_view(state, turns=not (params.opt_bool("excludeTurns") or False))
    return Reply(server.settings_view(state, thread),
                 after=lambda: server.broadcast("thread/started", {"thread": {**thread, "turns": []}}))


async def thread_read(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id = params.string("threadId")
    include_turns = params.opt_bool("includeTurns") or False
    return Reply({"thread": any_thread_view(server, thread_id, turns=include_turns)[0]})


def loaded(server: ServerContext, thread_id: str) -> ThreadState | None:
    """The thread's state when it is loaded (its agent is up)."""
    state = server.state(thread_id)
    return state if state is not None and server.threads.agent(thread_id) is not None else None


def any_thread_view(server: ServerContext, thread_id: str, *, turns: bool) -> tuple[Json, ThreadMeta]:
    """The ``Thread`` of a thread, loaded or not, and its settings."""
    state = loaded(server, thread_id)
    if state is not None:
        return server.thread_view(state, turns=turns), state.meta
    meta, stored_turns, _ = stored_meta(server, thread_id, with_turns=turns)
    path = server.index.rollouts.find(thread_id)
    view = thread_json(meta, ThreadStatus.NOT_LOADED, path=str(path) if path else None,
                       turns=stored_turns if turns else None)
    return view, meta


def page_bounds(params: Params) -> tuple[int, int]:
    """Where a page starts and ends (``limit``, ``cursor``: an offset this server gave out)."""
    cursor = params.opt_string("cursor")
    limit = params.opt_int("limit") or DEFAULT_PAGE
    if cursor and not (cursor.isascii() and cursor.isdigit() and len(cursor) < 19):  # an offset we gave out
        raise InvalidParams(f"{params.method}: `cursor` {shown(cursor)} is not a cursor this server gave out")
    start = int(cursor) if cursor else 0
    return start, start + min(limit, MAX_PAGE)


def page(params: Params, items: list[Any]) -> tuple[list[Any], str | None]:
    """One page of ``items`` (see ``page_bounds``) and the next page's cursor."""
    start, end = page_bounds(params)
    return items[start:end], str(end) if end < len(items) else None


async def thread_loaded_list(server: ServerContext, conn: Connection, params: Params) -> Reply:
    data, next_cursor = page(params, server.threads.loaded())
    return Reply({"data": data, "nextCursor": next_cursor})


async def thread_unsubscribe(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id = params.string("threadId")
    status = server.threads.unsubscribe(thread_id, conn)
    state = server.state(thread_id)
    if state is not None:
        state.subscribers.discard(conn)
    return Reply({"status": status.value})


async def thread_inject_items(server: ServerContext, conn: Connection, params: Params) -> Reply:
    thread_id = params.string("threadId")
    items = params.array("items")
    if not items or not all(isinstance(item, dict) and isinstance(item.get("type"), str) for item in items):
        raise InvalidParams("thread/inject_items: `items` must be a non-empty array of Responses items "
                            "(objects with a string `type`)")
    _state, agent = server.loaded_state(thread_id)
    await agent.inject(items)
    return Reply({})


async def thread_compact_start(server: ServerContext, conn: Connection, params: Params) -> Reply:
    """Compact now (``Agent.compact``): a turn of its own, queued behind a running one,
    whose ``contextCompaction`` item, ``thread/compacted`` and ``turn/completed`` follow
    the answer, as codex's compact task does."""
    state, agent = server.loaded_state(params.string("threadId"))
    async with state.lock:
        turn = await agent.compact()
        state.mapper.accept_turn(turn.turn_id, None)
        state.handles[turn.turn_id] = turn
    return Reply({})


METHODS = {
    "thread/start": thread_start,
    "thread/resume": thread_resume,
    "thread/fork": thread_fork,
    "thread/read": thread_read,
    "thread/loaded/list": thread_loaded_list,
    "thread/unsubscribe": thread_unsubscribe,
    "thread/inject_items": thread_inject_items,
    "thread/compact/start": thread_compact_start,
}
