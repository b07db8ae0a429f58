"""Child threads: the workers of a served thread as threads of their own (codex's
multi-agent v2 sub-agents), with ``open_app_server(multi_agent=True)``.

Theory of operation. A served thread's tools include the collaboration group, whose
``watch`` is ``Children.watcher(parent id)``: it runs beside each *load* of each worker
of that thread's agent (the worker belongs to the parent's agent and lives in its
nursery: the runtime's ``_workers``). For one load it

- creates the child's ``ThreadState`` -- on its first load a new record (``ThreadMeta``
  with ``parent_thread_id`` and the worker's path; ``thread/started`` goes to every
  client), on a reload the stored one, its turns and ids kept -- and subscribes the
  parent's subscribers to it (plus the client whose ``thread/resume`` reloaded it);
- holds it in the thread manager as a child thread (``ThreadManager.run_child``): its
  events become its notifications, its status and subscribers are its own, and idle
  unload *suspends* it -- its owner closes its agent and keeps its history and unread
  mail -- with ``thread/status/changed notLoaded`` and ``thread/closed``.

Mail to a suspended worker (``send_input``, ``send_message``, ``followup_task``) reloads
it from inside the runtime, which runs ``watch`` again. ``thread/resume`` of an
unloaded child asks its parent's agent to reload that worker (``resume``); when that
fails -- the parent is not loaded, or the reload itself failed -- the answer is an
error saying "cannot resume an unloaded multi-agent v2 sub-agent" and why, and the
child stays unloaded. A parent that unloads closes its workers: their threads close.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from .._errors import AgentError, InvalidSessionSnapshot
from ._connection import Connection
from ._jsonrpc import InvalidRequest
from ._shapes import ThreadMeta

if TYPE_CHECKING:
    from .._runtime import Agent
    from ._context import ServerContext
    from ._thread_state import ThreadState

__all__ = ["Children"]


class Children:
    """The child threads of one app server."""

    def __init__(self, server: ServerContext) -> None:
        self._server = server
        self._joining: dict[str, set[Connection]] = {}  # child id -> clients whose resume reloads it
        self._ready: dict[str, trio.Event] = {}  # child id -> set once its reload is registered

    def watcher(self, parent_id: str) -> Callable[[Agent], Awaitable[None]]:
        """The ``watch`` of the collaboration tools of thread ``parent_id``'s agent."""

        async def watch(child: Agent) -> None:
            await self.run(parent_id, child)

        return watch

    async def run(self, parent_id: str, child: Agent) -> None:
        """One load of a worker of ``parent_id``, as a child thread (see the module docstring)."""
        server = self._server
        parent = server.state(parent_id)
        if parent is None or server.closing:  # the parent is going away: just read what it says
            async for _ in child.events:
                pass
            return
        state, first = self._state(parent, child)
        state.agent = child
        subscribers = set(parent.subscribers) | self._joining.pop(child.session_id, set())
        state.subscribers |= subscribers
        ready = self._ready.pop(child.session_id, None)
        if ready is not None:
            ready.set()
        if first:
            server.broadcast("thread/started", {"thread": server.thread_view(state, turns=False)})
        await server.threads.run_child(child, parent_id=parent_id, subscribers=subscribers, started=first)

    def _state(self, parent: ThreadState, child: Agent) -> tuple[ThreadState, bool]:
        """The child's state for this load, and whether this is its first."""
        server = self._server
        try:
            stored = server.store.load(child.session_id)
        except InvalidSessionSnapshot as exc:
            # Its record is damaged (the file is data): the worker goes on, unrecorded, so
            # that the damaged file is kept as it is for the user to look at or repair;
            # the parent's clients are told. Raising here would end the parent's agent.
            for conn in parent.subscribers:
                conn.notify("warning", {"message": f"child thread {child.session_id} runs without a record: {exc}",
                                        "threadId": parent.meta.thread_id})
            return server.new_state(self._child_meta(parent, child, ephemeral=True), specs=parent.specs), False
        if stored is not None:
            return server.new_state(stored.meta, turns=stored.turns, usage_total=stored.usage_total,
                                    specs=parent.specs), False
        meta = self._child_meta(parent, child, ephemeral=parent.meta.ephemeral)
        if not meta.ephemeral:
            server.store.create(meta)
        return server.new_state(meta, specs=parent.specs), True

    def _child_meta(self, parent: ThreadState, child: Agent, *, ephemeral: bool) -> ThreadMeta:
        source = parent.meta
        return ThreadMeta(child.session_id, created_at=self._server.clock.now_s(), cwd=source.cwd,
                          model=source.model, model_provider=source.model_provider, ephemeral=ephemeral,
                          dynamic_tools=list(source.dynamic_tools), instructions=source.instructions,
                          originator=source.originator, sandbox=source.sandbox,
                          approval_policy=source.approval_policy, approvals_reviewer=source.approvals_reviewer,
                          parent_thread_id=source.thread_id, agent_path=child.path)

    async def resume(self, conn: Connection, meta: ThreadMeta) -> ThreadState:
        """``thread/resume`` of an unloaded child: its parent's agent reloads the worker."""
        server = self._server
        thread_id = meta.thread_id
        refused = f"cannot resume an unloaded multi-agent v2 sub-agent {thread_id}"
        parent_id = meta.parent_thread_id or ""
        parent = server.threads.agent(parent_id)
        collaboration = parent._collaboration if parent is not None else None
        if collaboration is None or meta.nickname is None:
            raise InvalidRequest(f"{refused}: its parent thread {parent_id} is not loaded (resume the parent: "
                                 "its agent runs the worker, and mail to the worker reloads it)")
        ready = self._ready[thread_id] = trio.Event()
        self._joining.setdefault(thread_id, set()).add(conn)
        try:
            await collaboration.reload_worker(meta.nickname)
            if server.threads.agent(thread_id) is None:  # reloaded now: wait until its watch holds it
                await ready.wait()
        except AgentError as exc:
            raise InvalidRequest(f"{refused}: {exc}") from exc
        finally:
            self._ready.pop(thread_id, None)
            joining = self._joining.get(thread_id)
            if joining is not None:
                joining.discard(conn)
                if not joining:
                    del self._joining[thread_id]
        state = server.state(thread_id)
        if state is None or state.agent is None or not server.threads.subscribe(thread_id, conn):
            raise InvalidRequest(f"{refused}: it closed again while it was being resumed; retry thread/resume")
        state.subscribers.add(conn)
        return state
