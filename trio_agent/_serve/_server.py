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
the agent's events. What a request handler must know before the pump sees the next
event (a turn's wire id and prompt, a steer's text) it registers under the thread's
``lock``, which the pump takes for ``run.started``/``run.steered``; the response is
queued before the handler returns (no checkpoint in between), so ``turn/start``'s
response always precedes its ``turn/started``. A dynamic tool call waits until the
pump has sent its ``item/started`` before the server asks the client.

Audiences: ``thread/started``, ``thread/status/changed`` and ``thread/closed`` go to
every initialized connection (they describe the thread list); turn, item, token-usage
and error notifications go to the thread's subscribers. That is codex's split too
(measured on codex 0.171.0 with two clients: the one subscribed to nothing gets the
other's ``thread/started`` and both status changes, nothing of its turn;
``tests/outsiders/test_serve_audiences.py``).

Cost per client (issue 23). Under many clients those broadcasts are most of what the
server sends, so delivering one is kept to an encoding (once, for every recipient) and
a queue append per client (``_connection``). The pump delivers every thread event that
is ready in one pass (at most ``PUMP_BURST``) before it yields, so each client's
writer finds the burst queued together and sends it in one write.
"""

from __future__ import annotations

import collections
import math
import sys
import traceback
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, final

import attrs
import trio

from .._base.approval_request import ApprovalRequest
from .._config import AgentConfig, context_window
from .._events import EventKind
from .._ids import uuid7
from .._runtime import Agent, AgentHandle, Turn
from .._threads import ThreadEvent, ThreadEvents, ThreadManager, ThreadStatus, open_thread_manager
from .._tools import Tools
from .._tools._security import ApprovalDecision, ApprovalPolicy, Approvals
from ._account import Account
from ._approvals import APPROVAL_METHODS, ApprovalUnanswered, decision_of, request_params
from ._channel import MessageChannel
from ._clock import WireClock
from ._connection import OUTGOING_LIMIT, Connection, PendingReply, Reply
from ._dynamic import (
    DynamicCalls,
    DynamicToolSpec,
    Introductions,
    build_tools,
    failure,
    parse_dynamic_tools,
    parse_reply,
)
from ._items import DynamicOutcome, Out, ThreadMapper
from ._jsonrpc import InvalidRequest, Notification, Request, RpcError, encode, notification_message
from ._permissions import approval_json, requested_sandbox, sandbox_json
from ._reviewer import AUTO_REVIEW_RATIONALE, auto_review_notifications, is_automatic, reviewer_json
from ._shapes import ThreadMeta, TurnRecord, thread_json
from ._store import ThreadStore
from ._thread_index import ThreadIndex
from ._turn_durability import RECORDED, record_progress

__all__ = ["SHUTDOWN_GRACE", "AppServer", "ThreadState", "open_app_server"]

SHUTDOWN_GRACE = 5.0
PUMP_BURST = 256  # thread events the pump delivers in one scheduler pass, when they are ready
Json = dict[str, Any]


class ThreadState:
    """What the server keeps for one loaded thread (one agent generation)."""

    def __init__(self, meta: ThreadMeta, mapper: ThreadMapper, specs: list[DynamicToolSpec],
                 calls: DynamicCalls) -> None:
        self.meta = meta
        self.mapper = mapper
        self.specs = specs
        self.calls = calls
        self.gate = Introductions()  # approvals, by approval id
        self.lock = trio.Lock()
        self.subscribers: set[Connection] = set()
        self.handles: dict[int, Turn] = {}  # this agent's turns that the server started
        self.agent: Agent | None = None

    @property
    def thread_id(self) -> str:
        return self.meta.thread_id


@final
class AppServer:
    """See the module docstring; create it with ``open_app_server``."""

    def __init__(self, config: AgentConfig, home: Path, nursery: trio.Nursery, *, unload_delay: float,
                 model_provider: str, outgoing_limit: int, multi_agent: bool = False,
                 web_search: bool = True) -> None:
        from ._children import Children

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
        self._states: dict[str, ThreadState] = {}
        self._retired: dict[str, collections.deque[ThreadState]] = {}
        self._connections: set[Connection] = set()
        self._stop = trio.Event()
        self._manager_done = trio.Event()
        self._pump_done = trio.Event()
        self._connection_left = trio.Event()
        self.closing = False

    # -- lifecycle -----------------------------------------------------------------------

    async def _run_manager(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with open_thread_manager(self.home, config=self.config, unload_delay=self.unload_delay,
                                           rollouts=self.index.rollouts) as threads:
                self._manager = threads
                self._nursery.start_soon(self._pump, threads.events)
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
                await self._pump_done.wait()
        for conn in list(self._connections):
            conn.finish()  # flush what is queued, then close
        with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_GRACE):
            while self._connections:
                await self._connection_left.wait()
        for conn in list(self._connections):
            conn.drop("the server is shutting down")
        await self.index.aclose()  # what the last turns wrote is indexed

    async def serve_connection(self, channel: MessageChannel, *, label: str = "client") -> None:
        """Serve one client over ``channel`` until it goes away (or the server closes)."""
        conn = Connection(self, channel, outgoing_limit=self._outgoing_limit, label=label)
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
        from ._router import dispatch

        return await dispatch(self, conn, request)

    def handle_notification(self, conn: Connection, notification: Notification) -> None:
        """Client notifications (``initialized``) need no action."""

    def connection_closed(self, conn: Connection) -> None:
        self._connections.discard(conn)
        self._connection_left.set()
        self._connection_left = trio.Event()
        for state in self._states.values():
            state.subscribers.discard(conn)
        if self._manager is not None:
            self._manager.unsubscribe_all(conn)

    # -- delivery ------------------------------------------------------------------------

    def broadcast(self, method: str, params: Json) -> None:
        text = encode(notification_message(method, params, emitted_at_ms=self.now_ms()))
        for conn in list(self._connections):
            if conn.initialized:
                conn.send_text(text, method)

    def publish(self, state: ThreadState, outs: list[Out]) -> None:
        for out in outs:
            if out.broadcast:
                self.broadcast(out.method, out.params)
                continue
            text = encode(notification_message(out.method, out.params, emitted_at_ms=self.now_ms()))
            for conn in list(state.subscribers):
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
        old = self._states.get(meta.thread_id)
        if old is not None:
            self._retired.setdefault(meta.thread_id, collections.deque()).append(old)
        self._states[meta.thread_id] = state
        return state

    def drop_state(self, state: ThreadState) -> None:
        """A load that failed: forget its state (and bring back a retired one)."""
        if self._states.get(state.thread_id) is state:
            del self._states[state.thread_id]
            retired = self._retired.get(state.thread_id)
            if retired:
                self._states[state.thread_id] = retired.pop()
                if not retired:
                    del self._retired[state.thread_id]

    def configure(self, state: ThreadState, config: AgentConfig, **changes: Any) -> AgentConfig:
        """The agent config of ``state``'s thread: its model, instructions, tools, sandbox
        and approval policy (what the thread asked for, else the server's), its
        credential (``_account``), its approval hook asking the thread's clients. Its
        workers (child threads) share it: tools are built per agent, and dynamic tool
        calls and approvals go to the thread that made them (by session id)."""
        meta = state.meta
        specs = state.specs
        build_tools(specs, self._asker(meta.thread_id))  # a name or schema the runtime refuses: refused now

        def tools_factory(handle: AgentHandle) -> Tools:
            watch = self.children.watcher(handle.session_id) if self.multi_agent else None
            return build_tools(specs, self._asker(handle.session_id), collaboration=watch,
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
        return Approvals(chosen, hook=self._approve, timeout=template.timeout)

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

    # -- dynamic tools -------------------------------------------------------------------

    def _asker(self, thread_id: str) -> Callable[[str, Any, str], Any]:
        async def ask(call_id: str, arguments: Any, tool: str) -> DynamicOutcome:
            state = self._states.get(thread_id)
            if state is None:
                await trio.lowlevel.checkpoint()
                return failure(f"dynamic tool {tool} could not run: thread {thread_id} is not served")
            turn_id = await state.calls.wait_introduced(call_id)
            outcome = await self._ask_subscribers(state, call_id, turn_id, tool, arguments)
            state.calls.outcomes[call_id] = outcome
            return outcome

        return ask

    async def _ask_subscribers(self, state: ThreadState, call_id: str, turn_id: str, tool: str,
                               arguments: Any) -> DynamicOutcome:
        targets = [conn for conn in state.subscribers if conn.initialized and not conn.closed]
        if not targets:
            return failure(f"dynamic tool {tool} could not run: no client is subscribed to thread "
                           f"{state.thread_id} to answer item/tool/call")
        pending = PendingReply(state.thread_id)
        params = {"threadId": state.thread_id, "turnId": turn_id, "callId": call_id, "namespace": None,
                  "tool": tool, "arguments": arguments}
        for conn in targets:
            conn.ask("item/tool/call", params, pending)
        try:
            result = await pending.wait()
        except RpcError as exc:
            return failure(f"dynamic tool {tool} failed: {exc.message}")
        finally:
            pending.abandon()  # the others who were asked are told it is resolved
        return parse_reply(result)

    # -- approvals (docs/app-server.md "Approvals and sandboxes") -----------------------------

    async def _approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Every served agent's approval hook: the clients of the thread that asks decide."""
        method = APPROVAL_METHODS[request.kind]
        state = self._states.get(request.session_id or "")
        if state is None:
            raise ApprovalUnanswered(f"{method}: thread {request.session_id} is not served")
        if request.turn_id is None:
            raise ApprovalUnanswered(f"{method} needs a turn to ask in; this call's cell outlived its turn")
        try:
            turn_id = await state.gate.wait_introduced(request.approval_id)
            if is_automatic(state.meta.approvals_reviewer):  # _reviewer: the server reviews, and denies
                shown = state.mapper.open_item(request.call_id)  # the item the review names
                for name, params in auto_review_notifications(state.thread_id, turn_id, request, self.now_ms(),
                                                              shown):
                    self.publish(state, [Out(name, params)])
                raise ApprovalUnanswered(AUTO_REVIEW_RATIONALE)
            result = await self._ask_for_approval(state, method, turn_id, request)
        finally:
            state.gate.forget(request.approval_id)
        return decision_of(request.kind, result)

    async def _ask_for_approval(self, state: ThreadState, method: str, turn_id: str, request: ApprovalRequest) -> Any:
        targets = [conn for conn in state.subscribers if conn.initialized and not conn.closed]
        if not targets:
            raise ApprovalUnanswered(f"no client is subscribed to thread {state.thread_id} to answer {method}")
        pending = PendingReply(state.thread_id)
        shown = state.mapper.open_item(request.call_id)  # the item the request names
        params = request_params(state.thread_id, turn_id, request, self.now_ms(), shown)
        for conn in targets:
            conn.ask(method, params, pending)
        try:
            return await pending.wait()  # an error reply or every client gone: RpcError, a denial
        finally:
            pending.abandon()  # cancelled (timeout, turn ended): each client asked is told it is resolved

    # -- the pump ------------------------------------------------------------------------

    async def _pump(self, events: ThreadEvents) -> None:
        try:
            async for event in events:
                await self._deliver(event)
                # What else is ready goes out in the same pass: each client's writer then
                # finds the burst queued and sends it in one write (``_connection``).
                for _ in range(PUMP_BURST):
                    try:
                        event = events.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    await self._deliver(event)
        finally:
            self._pump_done.set()

    async def _deliver(self, event: ThreadEvent) -> None:
        try:
            await self._on_thread_event(event)
        except Exception:  # a bug in the mapping: lose this event's notifications, not every client
            print(f"trio-agent serve: internal error mapping {event.kind} of thread {event.thread_id}:",
                  file=sys.stderr)
            traceback.print_exc(file=sys.stderr)

    def _target(self, thread_id: str) -> ThreadState | None:
        """The state an event belongs to: a retired generation's until its close."""
        retired = self._retired.get(thread_id)
        return retired[0] if retired else self._states.get(thread_id)

    async def _on_thread_event(self, tevent: ThreadEvent) -> None:
        state = self._target(tevent.thread_id)
        if tevent.kind == "thread.status" and tevent.status is ThreadStatus.NOT_LOADED:
            if state is not None:
                self.publish(state, state.mapper.set_status(ThreadStatus.NOT_LOADED))
            return
        if tevent.kind == "thread.closed":
            self.broadcast("thread/closed", {"threadId": tevent.thread_id})
            self._closed(tevent.thread_id)
            return
        event = tevent.event
        if tevent.kind != "agent" or event is None or state is None:
            return
        try:
            if event.kind in (EventKind.RUN_STARTED, EventKind.RUN_STEERED):
                async with state.lock:
                    outs = state.mapper.on_event(event)
            else:
                outs = state.mapper.on_event(event)
            if event.kind in RECORDED and not state.meta.ephemeral:  # a running turn, kept through a kill
                record_progress(self.store, state, event, outs)
            self.publish(state, outs)
        finally:
            if event.kind is EventKind.TOOL_CALL:  # even if mapping failed: the call must not wait forever
                self._introduce(state, event.turn_id, event.payload)
            elif event.kind is EventKind.APPROVAL_REQUESTED:
                self._introduce_approval(state, event.turn_id, event.payload)
        if event.kind is EventKind.TOOL_RESULT:
            call_id = event.payload.get("call_id")
            if isinstance(call_id, str):
                state.calls.forget(call_id)
        elif event.kind.is_terminal:
            self._turn_ended(state, event.turn_id)

    def _introduce(self, state: ThreadState, agent_turn_id: int | None, payload: Json) -> None:
        """A dynamic tool call's ``item/started`` is out: its request may go now (a call
        from a cell that outlived its turn names the latest turn)."""
        call_id = payload.get("call_id")
        if not isinstance(call_id, str) or payload.get("tool") not in state.mapper.dynamic_tools:
            return
        turn = state.mapper.wire_turn(agent_turn_id)
        turn_id = turn.record.id if turn is not None else state.mapper.turns[-1].id if state.mapper.turns else ""
        state.calls.introduce(call_id, turn_id)

    def _introduce_approval(self, state: ThreadState, agent_turn_id: int | None, payload: Json) -> None:
        """An approval's item and status are out: its request may go now."""
        approval_id = payload.get("approval_id")
        turn = state.mapper.wire_turn(agent_turn_id)
        if isinstance(approval_id, str):
            state.gate.introduce(approval_id, turn.record.id if turn is not None else "")

    def _turn_ended(self, state: ThreadState, agent_turn_id: int | None) -> None:
        mapper = state.mapper.wire_turn(agent_turn_id)
        if agent_turn_id is not None:
            state.handles.pop(agent_turn_id, None)
        if mapper is None:
            return
        mapper.record.history_end = _history_end(state.agent, agent_turn_id)
        meta = state.meta
        meta.updated_at = (mapper.record.completed_at_ms or self.now_ms()) // 1000
        if not meta.preview:
            meta.preview = _preview(mapper.record)
        if not meta.ephemeral:
            self.store.append_turn(meta.thread_id, mapper.record, state.mapper.usage_total)

    def _closed(self, thread_id: str) -> None:
        retired = self._retired.get(thread_id)
        if retired:
            retired.popleft()
            if not retired:
                del self._retired[thread_id]
            return
        self._states.pop(thread_id, None)


def _history_end(agent: Agent | None, agent_turn_id: int | None) -> int | None:
    """Where turn ``agent_turn_id``'s history ends (``_rollback``), when that is certain:
    it is the agent's latest turn and nothing runs or waits, so nothing was added since."""
    if agent is None or agent_turn_id is None:
        return None
    stats = agent.statistics()
    if stats.turns_accepted != agent_turn_id or stats.running_turn is not None or stats.turns_queued:
        return None
    return stats.history_items


def _preview(record: TurnRecord) -> str:
    for item in record.items:
        if item.get("type") == "userMessage":
            texts = [part.get("text", "") for part in item.get("content", []) if part.get("type") == "text"]
            return " ".join(texts)[:200]
    return ""


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
        try:
            yield server
        finally:
            await server.aclose()
