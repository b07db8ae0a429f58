"""The app server: a ``ThreadManager`` behind JSON-RPC connections.

Concurrency shape (issue 10): ``open_app_server`` owns the server's nursery. In it run
the thread manager (whose nursery holds one task per loaded thread), the *pump* (the
one task that reads the manager's events and turns them into notifications) and,
through ``serve_connection``, nothing else: each connection runs in its caller's task
with a nursery of its own (``_connection``). A connection that goes away is
unsubscribed everywhere; a turn it started goes on. ``aclose()`` (also on leaving the
block) refuses new work, closes the manager -- every thread is cancelled, its turns
end with their terminal events and its rollout is flushed --, lets the pump deliver
those last notifications, flushes every connection for up to ``SHUTDOWN_GRACE``
seconds and closes it. Nothing the server started outlives the block.

Ordering. The pump is the only writer of a thread's notifications, in the order of
the agent's events (``_pump``). What a request handler must know before the pump sees
the next event it registers under the thread's ``lock``; the response is queued before
the handler returns (no checkpoint in between), so ``turn/start``'s response always
precedes its ``turn/started``. A dynamic tool call waits until the pump has sent its
``item/started`` before the server asks the client (``_asking``).

Audiences: ``thread/started``, ``thread/status/changed`` and ``thread/closed`` go to
every initialized connection (they describe the thread list); turn, item, token-usage
and error notifications go to the thread's subscribers. That is codex's split too
(measured on codex 0.171.0 with two clients: the one subscribed to nothing gets the
other's ``thread/started`` and both status changes, nothing of its turn;
``tests/outsiders/test_serve_audiences.py``).

Cost per client (issue 23). Under many clients those broadcasts are most of what the
server sends, so delivering one is kept to an encoding (once, for every recipient) and
a queue append per client (``_connection``); the pump delivers what is ready in bursts.

Task hops per warm turn (issue 30, item 3). An agent's events reach the manager's
stream in the agent's own task (a listener; the stream is a deque the pump takes
without a schedule point per event); the pump is woken once per burst and writes each
client's share of the burst in one send at its end, never waiting for more (what is
written is what was ready: clients see every message as soon as before). A warm
``turn/start`` is served by the connection's reader itself when nothing is ahead of it
(``Connection``), and neither the pump nor the handler yields at the thread's lock
when it is free. Ordering is unchanged by all of these: notifications are still
written only by the pump in event order, and a response is still queued before its
handler returns. Backpressure too: nothing of this waits on a client -- a slow one
fills its own bounded queue and is dropped; the agents and the other clients never wait.

Layout: the method handlers, the child threads, the pump and the client questions
(``_asking``) take the server as a ``_context.ServerContext``, a protocol below them
all, so none of them imports this module; the loaded threads' states are
``_thread_state``'s.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, final

import attrs
import trio

from .._config import AgentConfig, context_window
from .._ids import uuid7
from .._runtime import Agent, AgentHandle
from .._threads import ThreadManager, ThreadStatus, open_thread_manager
from .._tools import Tools
from .._tools._security import ApprovalPolicy, Approvals
from ._asking import ClientQuestions
from ._channel import MessageChannel
from ._children import Children
from ._clock import WireClock
from ._connection import OUTGOING_LIMIT, Connection, Flusher, Reply
from ._credential import Account
from ._dynamic import DynamicCalls, DynamicToolSpec, build_tools, parse_dynamic_tools
from ._heard import makes_messages
from ._items import ThreadMapper
from ._jsonrpc import (
    InvalidRequest,
    Notification,
    Request,
    SharedText,
    encode_value,
    notification_text,
)
from ._outs import Out
from ._permissions import approval_json, requested_sandbox, sandbox_json
from ._pump import Pump
from ._reviewer import reviewer_json
from ._router import dispatch, serves_inline
from ._shapes import ThreadMeta, TurnRecord, thread_json
from ._store import ThreadStore
from ._thread_index import ThreadIndex
from ._thread_state import ThreadState, ThreadStates

__all__ = ["SHUTDOWN_GRACE", "AppServer", "open_app_server"]

SHUTDOWN_GRACE = 5.0
Json = dict[str, Any]


@final
class AppServer:
    """See the module docstring; create it with ``open_app_server``."""

    def __init__(self, config: AgentConfig, home: Path, nursery: trio.Nursery, *, unload_delay: float,
                 model_provider: str, outgoing_limit: int, multi_agent: bool = False,
                 web_search: bool = True) -> None:
        self.config = config
        self.multi_agent = multi_agent
        self.web_search = web_search  # threads get web__run (codex's web_search "live")
        self.children = Children(self)
        self.home = home
        self.model_provider = model_provider
        self.account = Account(config.auth, model_provider)
        self.unload_delay = unload_delay
        self.clock = WireClock()
        self.store = ThreadStore(home)
        self.index = ThreadIndex(home, self.store, model=config.model, provider=model_provider)  # thread/list
        self._nursery = nursery
        self._outgoing_limit = outgoing_limit
        self._manager: ThreadManager | None = None
        self._states = ThreadStates()
        self._flusher = Flusher()  # writes the connections' queues after each burst (``_connection``)
        self._pump = Pump(self, self._states, self._flusher)
        self._questions = ClientQuestions(self)
        self._connections: set[Connection] = set()
        self._stop = trio.Event()
        self._manager_done = trio.Event()
        self._connection_left = trio.Event()
        self.closing = False

    # -- lifecycle -----------------------------------------------------------------------

    async def _run_manager(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with open_thread_manager(self.home, config=self.config, unload_delay=self.unload_delay,
                                           rollouts=self.index.rollouts, relayed=makes_messages) as threads:
                self._manager = threads
                self._nursery.start_soon(self._pump.run, threads.events)
                task_status.started()
                await self._stop.wait()
        finally:
            self._manager_done.set()

    async def aclose(self) -> None:
        """Shut down (idempotent): threads cancelled with their terminal events and flushed
        rollouts, those notifications delivered, then every connection closed."""
        self.closing = True
        self._stop.set()
        with trio.CancelScope(shield=True):
            await self._manager_done.wait()  # the manager's own shutdown is bounded
            with trio.move_on_after(SHUTDOWN_GRACE):
                await self._pump.done.wait()
        self.store.close()  # the threads are closed: their records' descriptors too
        for conn in list(self._connections):
            conn.finish()  # flush what is queued, then close
        with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_GRACE):
            while self._connections:
                await self._connection_left.wait()
        for conn in list(self._connections):
            conn.drop("the server is shutting down")
        self._flusher.close()
        await self.index.aclose()  # what the last turns wrote is indexed

    async def serve_connection(self, channel: MessageChannel, *, label: str = "client") -> None:
        """Serve one client over ``channel`` until it goes away (or the server closes)."""
        conn = Connection(self, channel, outgoing_limit=self._outgoing_limit, label=label, flusher=self._flusher)
        if self.closing:
            await channel.aclose()
            return
        self._connections.add(conn)
        await conn.run()

    @property
    def threads(self) -> ThreadManager:
        if self.closing or self._manager is None:
            raise InvalidRequest("the server is shutting down; no new work is accepted")
        return self._manager

    def now_ms(self) -> int:
        return self.clock.now_ms()

    # -- connections (ConnectionHost) ----------------------------------------------------

    async def handle_request(self, conn: Connection, request: Request) -> Reply:
        return await dispatch(self, conn, request)

    def serves_inline(self, conn: Connection, request: Request) -> bool:
        return serves_inline(self, conn, request)

    def handle_notification(self, conn: Connection, notification: Notification) -> None:
        """Client notifications (``initialized``) need no action."""

    def connection_closed(self, conn: Connection) -> None:
        self._connections.discard(conn)
        self._connection_left.set()
        self._connection_left = trio.Event()
        for state in self._states:
            state.subscribers.discard(conn)
        if self._manager is not None:
            self._manager.unsubscribe_all(conn)

    # -- delivery ------------------------------------------------------------------------

    def broadcast(self, method: str, params: Json, emitted_at_ms: int | None = None) -> None:
        emitted = self.now_ms() if emitted_at_ms is None else emitted_at_ms
        text = SharedText(notification_text(method, encode_value(params), emitted))
        for conn in list(self._connections):
            if conn.initialized:
                conn.send_text(text, method)

    def publish(self, state: ThreadState, outs: list[Out]) -> None:
        if not outs:
            return
        emitted = self.clock.now_ms()  # one instant for all of them: Trio's clock does not move in this call
        # (taken once: nothing here leaves a set of subscribers -- a connection dropped
        # for a full queue is closed at once, so what it is sent next is ignored)
        subscribers = list(state.subscribers)
        shared = len(subscribers) > 1
        for out in outs:
            if out.broadcast:
                self.broadcast(out.method, out.params, emitted)
                continue
            if not subscribers:
                continue
            # ``encode(notification_message(...))``'s text, the message's head built once
            # per method (``notification_text``): only the params are encoded per message
            params_text = out.params_text  # (a text delta's, encoded by the mapper)
            plain = notification_text(out.method, encode_value(out.params) if params_text is None else params_text,
                                      emitted)
            text = SharedText(plain) if shared else plain
            for conn in subscribers:
                conn.send_text(text, out.method)

    # -- thread states -------------------------------------------------------------------

    def state(self, thread_id: str) -> ThreadState | None:
        return self._states.get(thread_id)

    def loaded_state(self, thread_id: str) -> tuple[ThreadState, Agent]:
        """The loaded thread, or ``InvalidRequest`` saying to resume it."""
        state = self._states.get(thread_id)
        agent = self._manager.agent(thread_id) if self._manager is not None else None
        if state is None or agent is None:
            raise InvalidRequest(f"thread {thread_id} is not loaded; call thread/resume first")
        return state, agent

    def new_state(self, meta: ThreadMeta, *, turns: Sequence[TurnRecord] = (), usage_total: Json | None = None,
                  specs: list[DynamicToolSpec] | None = None) -> ThreadState:
        """A state for a thread being loaded; replaces (retires) one still awaiting its close."""
        state_specs = specs if specs is not None else parse_dynamic_tools(meta.dynamic_tools)
        calls = DynamicCalls()
        mapper = ThreadMapper(
            meta.thread_id, cwd=meta.cwd, model_context_window=context_window(meta.model),
            dynamic_tools=frozenset(spec.name for spec in state_specs), new_id=lambda: str(uuid7()),
            now_ms=self.now_ms, outcomes=calls.outcome, turns=list(turns),
        )
        mapper.usage_total = usage_total
        state = ThreadState(meta, mapper, state_specs, calls)
        self._states.add(state)
        self.store.hold(meta.thread_id)  # its record's descriptor stays open while it is loaded
        return state

    def drop_state(self, state: ThreadState) -> None:
        """A load that failed: forget its state (and bring back a retired one)."""
        self._states.drop(state)
        if self._states.target(state.thread_id) is None:
            self.store.release(state.thread_id)

    def configure(self, state: ThreadState, config: AgentConfig, **changes: Any) -> AgentConfig:
        """The agent config of ``state``'s thread: its model, instructions, tools, sandbox
        and approval policy (what the thread asked for, else the server's), its
        credential (``_account``), its approval hook asking the thread's clients. Its
        workers (child threads) share it: tools are built per agent, and dynamic tool
        calls and approvals go to the thread that made them (by session id)."""
        meta = state.meta
        specs = state.specs
        build_tools(specs, self._questions.asker(meta.thread_id))  # a name or schema the runtime refuses: refused now

        def tools_factory(handle: AgentHandle) -> Tools:
            watch = self.children.watcher(handle.session_id) if self.multi_agent else None
            return build_tools(specs, self._questions.asker(handle.session_id), collaboration=watch,
                               web_search=self.web_search)

        changes.setdefault("sandbox", requested_sandbox(meta.sandbox) if meta.sandbox is not None else config.sandbox)
        changes.setdefault("approval", self.approvals(meta.approval_policy))
        changes.setdefault("auth", self.account.auth)  # a key given by account/login/start, else the server's
        return attrs.evolve(config, model=meta.model, instructions=meta.instructions, tools=None,
                            tools_factory=tools_factory, **changes)

    def approvals(self, policy: str | None) -> Approvals:
        """``ta.Approvals`` of a thread: ``policy`` (None: the server's) decided by the
        clients of the thread that asks."""
        template = self.config.approval
        chosen = ApprovalPolicy(policy) if policy is not None else template.policy
        return Approvals(chosen, hook=self._questions.approve, timeout=template.timeout)

    def thread_view(self, state: ThreadState, *, turns: bool, status: ThreadStatus | None = None) -> Json:
        path = state.agent.rollout.path if state.agent is not None and state.agent.rollout is not None else None
        shown_status = status if status is not None else state.mapper.status
        effort = state.agent.thinking.value if state.agent is not None else None
        return thread_json(state.meta, shown_status, path=str(path) if path else None,
                           turns=state.mapper.turns if turns else None, reasoning_effort=effort,
                           active_flags=state.mapper.active_flags)

    def settings_view(self, state: ThreadState, thread: Json) -> Json:
        """The fields ``thread/start``, ``thread/resume`` and ``thread/fork`` answer with:
        the sandbox and approval policy the agent runs (after any fallback)."""
        agent = state.agent
        assert agent is not None
        return {
            "thread": thread, "model": state.meta.model, "modelProvider": state.meta.model_provider,
            "serviceTier": None, "cwd": state.meta.cwd, "instructionSources": [],
            "approvalPolicy": approval_json(agent.approval_policy),
            "approvalsReviewer": reviewer_json(state.meta.approvals_reviewer),
            "sandbox": sandbox_json(agent.sandbox_settings), "reasoningEffort": thread.get("reasoningEffort"),
            "disabledPluginIds": [],
        }


@asynccontextmanager
async def open_app_server(
    config: AgentConfig, *, home: str | Path, unload_delay: float = 60.0, model_provider: str = "openai",
    outgoing_limit: int = OUTGOING_LIMIT, multi_agent: bool = False, web_search: bool = True,
) -> AsyncIterator[AppServer]:
    """Run an app server for the duration of the block; serve clients with
    ``await server.serve_connection(channel)`` (see ``serve_stdio``/``serve_websocket``).

    ``config`` is the template of every thread's agent (auth, transport, model...);
    ``home`` holds the rollouts (``sessions/``) and the server's thread records
    (``app-server/``); ``unload_delay`` is the default idle-unload delay in seconds;
    ``outgoing_limit`` bounds each client's queue of unsent messages (a client that
    falls that far behind is dropped); ``multi_agent`` gives every thread the
    collaboration tools, whose workers are child threads (codex's multi-agent v2);
    ``web_search=False`` leaves ``web__run`` out of every thread's tools.
    Leaving the block shuts down as ``aclose()``.
    """
    if not isinstance(config, AgentConfig):
        raise TypeError("open_app_server() needs a ta.AgentConfig as the template of its threads")
    if outgoing_limit < 1 or not math.isfinite(outgoing_limit):
        raise ValueError(f"outgoing_limit must be a positive number of messages, got {outgoing_limit!r}")
    if config.approval.policy is ApprovalPolicy.ON_FAILURE:
        raise ValueError("the app-server protocol has no on-failure approval policy (AskForApproval is untrusted, "
                         "on-request or never); configure the server with one of those")
    async with trio.open_nursery() as nursery:
        server = AppServer(config, Path(home), nursery, unload_delay=unload_delay, model_provider=model_provider,
                           outgoing_limit=outgoing_limit, multi_agent=multi_agent, web_search=web_search)
        await nursery.start(server.index.run)  # opens or rebuilds the index in a thread: returns at once
        await nursery.start(server._run_manager)
        nursery.start_soon(server._flusher.run)
        try:
            yield server
        finally:
            await server.aclose()

