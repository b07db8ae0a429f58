"""``AgentParts``: the parts of one agent, wired, and their start and stop.

The composition root behind the ``Agent`` facade: it builds the ``TurnLedger`` (the
one writer of history, ``_session``), the ``ModelClient`` (transport and chain), the
``ToolDispatcher`` with the clock and collaboration groups, the ``TurnQueue``, the
``TurnRunner``, the exec guard, the rollout and the event sink, plus the
``ChildFactory`` and the owner's ``HostHooks``. It is the one place the observer seam
is installed (``_observers``): the agent's observers (what the tree's add-ons make of
it) get its sink, its queue and reporter (each turn's input and end) and the model
client's connection tap. None of the parts holds a reference
back to the agent: what they need of it comes in as the agent's mail ``address``,
its weak ``handle``, its ``spawn`` and the ``opener`` of children. The agent's block
(``_lifecycle``) calls ``startup``, ``wait_turns``, ``shutdown`` and ``close_rollout``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import trio

from .._base.handle import AgentHandle
from .._config import AgentConfig, Transport
from .._errors import ConfigError
from .._ids import new_item_id
from .._session.context import DEFAULT_INSTRUCTIONS, request_prefix
from .._session.ledger import TurnLedger
from .._tools import Tools
from .._tools._namespaces import CLOCK, COLLABORATION
from ._calls._collaboration import Collaboration, MailAddress
from ._calls._permissions import ExecGuard
from ._calls._sleep import SleepTool
from ._calls._tool_dispatch import ToolDispatcher
from ._calls._tool_environment import GroupRunners, ToolEnvironment
from ._children import ChildFactory, Origin, resume_seed
from ._hosting import HostHooks
from ._identity import SessionInfo, TurnJournal, open_rollout
from ._model._client import ModelClient
from ._observers import AgentSite, Observers
from ._secrets import Redactor
from ._turns._prompt_settings import PromptSettings
from ._turns._queue import TurnQueue
from ._turns._reporter import TurnReporter
from ._turns._runner import ForkPoint, TurnRunner

if TYPE_CHECKING:
    from ._calls._workers import WorkerAgent
    from ._statistics import AgentStatistics

__all__ = ["AgentParts"]

A = TypeVar("A", bound="WorkerAgent")  # the agent class (Agent): its children and workers are ones too


def _origin_kind(origin: Origin) -> str:
    """How an agent came to be, for its observers: a fork, a spawned child, a resumed session or a root."""
    if origin.seed is not None:
        return "fork"
    if origin.parent_id is not None:
        return "spawn"
    return "resume" if origin.config.resume is not None else "root"


def _build_tools(config: AgentConfig, handle: AgentHandle) -> Tools:
    """The agent's ``Tools``: ``AgentConfig`` names them through a protocol (``ToolSet``)."""
    if config.tools_factory is not None:
        tools = config.tools_factory(handle)
        if not isinstance(tools, Tools):
            raise ConfigError("tools_factory must return a ta.Tools")
        return tools
    if config.tools is None:
        return Tools.default()
    if not isinstance(config.tools, Tools):
        raise ConfigError(f"tools must be a ta.Tools, got {type(config.tools).__name__}")
    return config.tools


class AgentParts(Generic[A]):
    """The wired parts of one agent (see the module docstring)."""

    def __init__(
        self, origin: Origin, nursery: trio.Nursery, *, address: MailAddress, handle: AgentHandle,
        spawn: Callable[[str], AbstractAsyncContextManager[A]],
        opener: Callable[[Origin], AbstractAsyncContextManager[A]],
    ) -> None:
        config, path, seed = origin.config, origin.path, origin.seed
        self.config = config
        self.address = address
        # The observer seam (``_observers``): made now, in the opening task (a tracer's agent
        # span is a child of the span current here).
        secrets = Redactor()  # the model client adds every credential it sends
        self.observers = Observers(origin.attachments or (), AgentSite(config, path, origin.parent_id,
                                                                       _origin_kind(origin), secrets))
        self.sink = self.observers.sink()
        self.current = PromptSettings(config)  # set_model, set_thinking, set_fast_mode change it
        tools = _build_tools(config, handle)
        workspace = config.resolved_workspace()
        lineage_id = origin.lineage_id or config.session_id  # the root session of this lineage
        prefix = request_prefix(tools.definitions(), config.instructions)  # what resume= is checked against
        if seed is None and config.resume is not None:
            seed, lineage_id = resume_seed(config, prefix)
        # A fork starts from a boundary of its parent: that history, chained on that
        # response, with no warmup of its own (SPEC sec. 5); a resumed session starts from
        # its snapshot, unchained: its first request is a full replay (SPEC sec. 8).
        self.seeded = seed is not None
        self.warmup = origin.warmup  # False: the socket only at startup, no warmup request
        self.ledger = TurnLedger(prefix, new_item_id, seed.history if seed is not None else None)
        emit = self.sink.emit
        self.model = ModelClient(config, self.ledger, self.sink, nursery, chain=seed.chain if seed else None,
                                 tap=self.observers.tap, redactor=secrets,
                                 api_events=config.api_events or self.observers.api_events, early=origin.early)
        fork_point = ForkPoint(seed)
        self.session = SessionInfo(
            model=config.model, lineage_id=lineage_id, prompt_cache_key=config.cache_key,
            workspace=str(workspace), request_prefix=prefix,
            instructions=config.instructions or DEFAULT_INSTRUCTIONS,
        )
        self.children: ChildFactory[A] = ChildFactory(
            origin, session_id=config.session_id, lineage_id=lineage_id, workspace=workspace,
            settings=self.current, fork_point=fork_point, address=address, opener=opener,
        )
        observed = self.observers if len(self.observers) else None  # unobserved: no call per turn
        reporter = TurnReporter(config, workspace, emit, self.model.stats, defer=self.sink.defer, observers=observed)
        self.queue = TurnQueue(reporter, observed)
        self.rollout = open_rollout(config, self.session, self.ledger.history, origin.parent_id)
        sleep = SleepTool(pending=self.queue.pending_input_for, emit=emit, record_event=self._record_event)
        groups: dict[str, GroupRunners] = {
            CLOCK: lambda name, state: sleep.runner(state) if name == "sleep" else None,
        }
        self.collaboration: Collaboration[A] | None = None
        if tools.collaboration is not None:
            # The options name ta.Agent, which this module does not import; A is that class.
            watch = cast("Callable[[A], Awaitable[None]] | None", tools.collaboration.watch)
            self.collaboration = Collaboration(
                tools.collaboration, path=path, spawn=spawn, watch=watch,
                queue=self.queue, nursery=nursery, emit=emit, reopen=self.children.reopen,
            )
            groups[COLLABORATION] = self.collaboration.runner
        self.host = HostHooks(queue=self.queue, ledger=self.ledger, model=self.model, session=self.session,
                              settings=self.current)  # for the agent's owner: Workers, ThreadManager
        self.guard = ExecGuard(config.sandbox, config.approval, workspace, emit, self._cancel_turn,
                               session_id=config.session_id)
        self.tools = ToolDispatcher(ToolEnvironment(
            tools, workspace, handle, emit, nursery, groups,
            config=config, history=lambda: self.ledger.history, guard=self.guard,
        ))
        if tools.mcp_servers and tools.has_builtins:  # exec's description lists active MCP tools
            from ._live_prefix import LivePrefix

            live = LivePrefix(tools, lambda: self.ledger.prefix, self.tools.active_mcp_tools)
            self.model.bodies.live_prefix = live.current
        self.runner = TurnRunner(
            ledger=self.ledger, model=self.model, tools=self.tools, reporter=reporter,
            fork_point=fork_point, session=self.session, workspace=workspace,
            context_recorded=bool(seed is not None and len(seed.history)),
            permissions=self.guard.permissions_message,
        )
        if self.rollout is not None:
            self.ledger.subscribe(self.rollout.on_ledger)
            reporter.journal = TurnJournal(self.rollout, config.session_id)
        self.nursery = nursery

    def _cancel_turn(self, turn_id: int) -> None:
        """Cancel running turn ``turn_id`` (an approval hook's ``abort``)."""
        running = self.queue.running
        if running is not None and running.turn_id == turn_id:
            running.cancel()

    def _record_event(self, payload: dict[str, Any]) -> None:
        if self.rollout is not None:
            self.rollout.record_event(payload)

    def statistics(self) -> AgentStatistics:
        from ._statistics import AgentStatistics  # its attrs class is built by the first call

        transport = self.model.stats
        running = self.queue.running
        return AgentStatistics(
            session_id=self.config.session_id,
            turns_accepted=self.queue.accepted,
            turns_queued=self.queue.queued,
            running_turn=running.turn_id if running is not None else None,
            last_turn_status=self.queue.last_status,
            history_items=len(self.ledger.history),
            connection_attempts=transport.connection_attempts,
            websocket_reconnects=transport.websocket_reconnects,
            response_attempts=transport.response_attempts,
            response_retries=transport.response_retries,
            warmup_usage=transport.warmup_usage,
        )

    # -- start and stop (the agent's block, _lifecycle) -------------------------------------

    async def startup(self) -> None:
        # Import the transport (trio-websocket; httpx) now, while the sandbox trial started
        # by run_agent may still be running: the warmup below, or the first prompt, needs it.
        from .._transport._tls import prefetch

        responses = self.config.responses
        if self.config.responses.transport is Transport.WEBSOCKET:
            if responses.ssl_context is None and self.config.websocket_url.startswith("wss:"):
                prefetch(self.nursery, "websocket")  # the CA bundle loads beside the import and the build
            from .._transport import websocket as _websocket  # noqa: F401
        else:
            from .._transport._httpx_lean import import_httpx

            import_httpx()  # without its command-line client (click, pygments): _httpx_lean
            from .._transport import https as _https  # noqa: F401

            if responses.ssl_context is None and responses.http_client is None \
                    and self.config.api_base_url.startswith("https:"):
                prefetch(self.nursery, "https")
        self.guard.prepare()  # SandboxUnavailable fails open_agent before anything starts
        self.tools.start()  # MCP servers, in the background
        self.observers.start(self.nursery)  # their deferred work (tracing: ended turns' spans)
        self.nursery.start_soon(self.runner.run, self.queue)
        if self.config.responses.transport is Transport.WEBSOCKET and not self.seeded:
            await self.nursery.start(self.model.warmup, self.current.request(), self.warmup)

    async def wait_turns(self) -> None:
        self.queue.close()
        await self.queue.wait_all()

    async def shutdown(self) -> None:
        self.observers.stop()  # what they deferred is flushed when they close
        self.address.close()  # mail posted from now on raises AgentClosed
        if self.collaboration is not None:
            self.collaboration.close()  # workers are cancelled; the nursery waits for them
        self.queue.close()
        self.model.close()
        await self.tools.aclose()
        await self.model.aclose()

    def close_rollout(self) -> None:
        """Flush and close the rollout: only once every task of the agent has ended, so
        what a cancelled turn commits on its way out (its prompt, ``<turn_aborted>``) is
        in the file. Under an outer cancellation the turn task runs its abort only after
        ``shutdown`` began, and with no tool running there is no checkpoint before it."""
        if self.rollout is not None:
            self.rollout.close()
