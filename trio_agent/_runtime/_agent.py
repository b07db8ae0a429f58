"""``open_agent`` and the ``Agent``: the agent's nursery and its FIFO turn runner.

Concurrency shape (DESIGN "Concurrency shape"): ``open_agent`` owns one nursery that
holds the startup warmup (started with ``nursery.start``, so it holds the model lock
before any turn can run), the socket tasks, and the runner that executes accepted
turns one at a time, FIFO. Leaving the ``async with`` block normally stops accepting
prompts and waits for every accepted turn to finish (nursery semantics); then the
socket is closed and ``agent.events`` ends. Cancelling the enclosing scope cancels
the live turn (which still emits its terminal ``run.failed`` with status
``cancelled``); queued turns are then resolved as cancelled without running.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, final

import attrs
import trio

from .._config import AgentConfig, Thinking, Transport, _default_session_id
from .._errors import AgentClosed, CheckpointLineageMismatch, ConfigError, ForkBeforeCompletedTurn, InvalidPrompt
from .._events import AgentEvents, EventKind, EventSink
from .._ids import new_item_id
from .._session.context import (
    DEFAULT_INSTRUCTIONS,
    additional_tools_item,
    instructions_message,
)
from .._session.conversation import Conversation, ConversationSnapshot
from .._session.history import History
from .._session.snapshot import check_prefix
from .._tools import Tools
from .._wire.request import RequestSettings
from . import _pending_input
from ._context_io import context_user_message
from ._driver import emit_cancelled_without_running, run_turn
from ._model import ModelClient
from ._payloads import run_started_payload, terminal_payload
from ._pending_input import Declined, Submission
from ._sessions import Rollout, SessionInfo, open_rollout
from ._stats import TurnStats
from ._tool_dispatch import ToolDispatcher
from ._turn import Prompt, Turn, TurnResult, TurnState

__all__ = ["Agent", "AgentHandle", "open_agent"]

_NS = 1_000_000_000
SHUTDOWN_GRACE = 5.0  # closing sockets, cells and shell sessions on the way out


@final
class AgentHandle:
    """A weak handle to an agent, given to ``tools_factory`` and tool handlers.

    It does not keep the agent alive; using it after the agent closed raises
    ``AgentClosed``.
    """

    def __init__(self, agent: Agent) -> None:
        self._agent = weakref.ref(agent)

    @property
    def session_id(self) -> str:
        return self._get().session_id

    def fork(self) -> AbstractAsyncContextManager[Agent]:
        """``Agent.fork`` of the agent this handle belongs to."""
        return self._get().fork()

    def fork_from(self, result: TurnResult) -> AbstractAsyncContextManager[Agent]:
        return self._get().fork_from(result)

    def spawn(self) -> AbstractAsyncContextManager[Agent]:
        """``Agent.spawn`` of the agent this handle belongs to."""
        return self._get().spawn()

    def _get(self) -> Agent:
        agent = self._agent()
        if agent is None or agent._closing:
            raise AgentClosed("the agent behind this handle has closed")
        return agent


@final
class Agent:
    """A running agent; create it with ``open_agent``. See the module docstring."""

    def __init__(
        self,
        config: AgentConfig,
        nursery: trio.Nursery,
        seed: ConversationSnapshot | None = None,
        parent_id: str | None = None,
        lineage_id: str | None = None,
    ) -> None:
        self.config = config
        self._nursery = nursery
        self._sink = EventSink(config.session_id)
        self._thinking = config.thinking
        self._fast_mode = config.fast_mode
        self._closing = False
        self._next_turn_id = 0
        self._queue_send, self._queue_receive = trio.open_memory_channel[TurnState](math.inf)
        self._pending: list[TurnState] = []
        self.handle = AgentHandle(self)
        self.tools = self._build_tools()
        self.workspace = config.resolved_workspace()
        self._lineage_id = lineage_id or config.session_id  # the root session of this lineage
        self.conversation = Conversation(
            prefix=(
                additional_tools_item(self.tools.definitions()),
                instructions_message(config.instructions or DEFAULT_INSTRUCTIONS),
            ),
            id_factory=new_item_id,
        )
        if seed is None and config.resume is not None:
            seed = self._resume_seed(config)
        # A fork starts from a boundary of its parent: that history, chained on that
        # response, with no warmup of its own (SPEC sec. 5); a resumed session starts from
        # its snapshot, unchained: its first request is a full replay (SPEC sec. 8).
        self._seeded = seed is not None
        if seed is not None:
            self.conversation.history = seed.history
            self.conversation.previous_response_id = seed.previous_response_id
            self.conversation.delta_start = seed.delta_start
        self.context_recorded = bool(seed is not None and len(seed.history))
        self.last_total_tokens = 0  # usage.total_tokens of the last response (auto-compaction)
        self.next_turn_items: list[dict[str, Any]] = []  # injected while idle
        # The latest boundary a fork() branches from (published by the driver).
        self.fork_point: ConversationSnapshot | None = seed
        self.model = ModelClient(config, self.conversation, self.emit, nursery)
        self.dispatcher = ToolDispatcher(self)
        self._rollout = open_rollout(self, parent_id)
        self._terminal_mark = self.model.stats.copy()

    # -- public API ------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.config.session_id

    @property
    def events(self) -> AgentEvents:
        """Every event of this agent, in order; the iteration ends after the agent closed."""
        return self._sink.stream

    @property
    def thinking(self) -> Thinking:
        return self._thinking

    @property
    def fast_mode(self) -> bool:
        return self._fast_mode

    async def prompt(self, prompt: str | Prompt) -> Turn:
        """Accept a prompt; returns once it is queued (prompts run one at a time, FIFO).

        The turn keeps the thinking and fast mode current *now*, even if they change
        before it runs. Raises ``InvalidPrompt`` for empty text and ``AgentClosed``
        once the agent's block is closing.
        """
        await trio.lowlevel.checkpoint()
        if isinstance(prompt, str):
            prompt = Prompt(prompt)
        if not isinstance(prompt, Prompt) or not prompt.text.strip():
            raise InvalidPrompt("a prompt needs non-empty text")
        if self._closing:
            raise AgentClosed("the agent is closing; open a new agent to send more prompts")
        self._next_turn_id += 1
        state = TurnState(self._next_turn_id, prompt, self._settings())
        self._pending.append(state)
        self._queue_send.send_nowait(state)
        return Turn(self, state)

    async def submit(self, prompt: str | Prompt) -> Submission:
        """Steer the running turn if it can still take a steer, else start a turn;
        returns which (``Submission.kind``) and the turn."""
        return await _pending_input.submit(self, prompt)

    async def start_if_idle(self, prompt: str | Prompt) -> Turn | Declined:
        """Start a turn only if nothing is running or queued; otherwise return
        ``Declined(reason)`` and record nothing."""
        return await _pending_input.start_if_idle(self, prompt)

    async def inject(self, items: Sequence[dict[str, Any]]) -> Literal["joined", "queued"]:
        """Raw Responses items for the model: they join the running turn at its next
        request (``"joined"``), or the next turn's first request (``"queued"``)."""
        return await _pending_input.inject(self, items)

    async def interrupt_if_no_pending_input(self, turn_id: int) -> bool:
        """Cancel running turn ``turn_id`` only if no input waits for it (no pending
        steer, no queued prompt); True if it did. Answers before the cancellation
        completes, so the turn's own tools may call it."""
        await trio.lowlevel.checkpoint()
        return _pending_input.interrupt_if_no_pending_input(self, turn_id)

    async def set_thinking(self, thinking: Thinking) -> None:
        """Reasoning effort for prompts accepted from now on."""
        if not isinstance(thinking, Thinking):
            raise ConfigError(f"thinking must be a ta.Thinking, got {thinking!r}")
        await trio.lowlevel.checkpoint()
        self._thinking = thinking

    def publish_fork_point(self) -> None:
        """Record the current boundary: a ``fork()`` from now on branches from here."""
        self.fork_point = self.conversation.snapshot()
        self.persist_rollout()

    # -- sessions and rollouts -----------------------------------------------------------

    @property
    def rollout(self) -> Rollout | None:
        """The rollout file (``.path``) when ``AgentConfig(rollout=...)`` is set."""
        return self._rollout

    async def flush_rollout(self) -> None:
        """Write every committed item and fsync the rollout (``RolloutError`` on failure)."""
        await trio.lowlevel.checkpoint()
        if self._rollout is not None:
            self._rollout.flush(self.conversation.history)

    def persist_rollout(self) -> None:
        """Append newly committed history to the rollout (never raises: a failure is
        kept and reported by ``flush_rollout``)."""
        if self._rollout is not None:
            self._rollout.append(self.conversation.history)

    def session_info(self) -> SessionInfo:
        config = self.config
        return SessionInfo(
            model=config.model, lineage_id=self._lineage_id, prompt_cache_key=self.lineage,
            workspace=str(self.workspace), request_prefix=self.conversation.prefix,
            instructions=config.instructions or DEFAULT_INSTRUCTIONS,
        )

    def _resume_seed(self, config: AgentConfig) -> ConversationSnapshot:
        snapshot = config.resume
        assert snapshot is not None
        check_prefix(
            snapshot, request_prefix=list(self.conversation.prefix),
            instructions=config.instructions or DEFAULT_INSTRUCTIONS,
        )
        self._lineage_id = snapshot.lineage_id
        return ConversationSnapshot(self.conversation.prefix, History(snapshot.history), None, 0)

    @property
    def lineage(self) -> str:
        """The prompt cache key shared by this agent and every fork of it."""
        return self.config.cache_key

    def fork(self) -> AbstractAsyncContextManager[Agent]:
        """``async with agent.fork() as branch``: a child from the latest boundary.

        The branch inherits the committed history plus the live turn's committed delta
        (its prompt, finished tool outputs and joined steers), chains on the last
        completed response, keeps the lineage's prompt cache key, gets its own session
        id and connection (no warmup) and the agent's current thinking. It runs
        concurrently with this agent; leaving the block closes it like ``open_agent``.
        Raises ``ForkBeforeCompletedTurn`` before the first model boundary.
        """
        point = self.fork_point
        if point is None:
            raise ForkBeforeCompletedTurn(
                "fork() needs a model boundary to branch from: prompt the agent first, or use spawn()"
            )
        return _open_agent(
            self._child_config(keep_lineage=True), seed=point, parent_id=self.session_id, lineage_id=self._lineage_id
        )

    def fork_from(self, result: TurnResult) -> AbstractAsyncContextManager[Agent]:
        """``async with agent.fork_from(result) as branch``: a child from the end of that
        turn; it chains on the turn's final response and nothing later leaks in."""
        checkpoint = result._checkpoint
        if checkpoint is None or result._lineage != self.lineage:
            raise CheckpointLineageMismatch(
                f"turn {result.turn_id}'s result does not belong to this agent's lineage "
                f"(prompt cache key {self.lineage!r}); fork from a result of this agent or its forks"
            )
        return _open_agent(
            self._child_config(keep_lineage=True), seed=checkpoint, parent_id=self.session_id,
            lineage_id=self._lineage_id,
        )

    def spawn(self) -> AbstractAsyncContextManager[Agent]:
        """``async with agent.spawn() as child``: a clean child -- no history, same
        instructions and explicit prompt cache key, current thinking, a new session id;
        it warms up on its own."""
        return _open_agent(self._child_config(keep_lineage=False), parent_id=self.session_id)

    def _child_config(self, *, keep_lineage: bool) -> AgentConfig:
        key = self.lineage if keep_lineage else self.config.prompt_cache_key
        return attrs.evolve(
            self.config,
            session_id=_default_session_id(),
            prompt_cache_key=key,
            thinking=self._thinking,
            fast_mode=self._fast_mode,
            workspace=self.workspace,
            resume=None,
        )

    async def set_fast_mode(self, enabled: bool) -> None:
        """``service_tier: "priority"`` for prompts accepted from now on."""
        await trio.lowlevel.checkpoint()
        self._fast_mode = bool(enabled)

    # -- internals used by the driver ----------------------------------------------------

    def emit(self, kind: EventKind, payload: dict[str, Any], turn_id: int | None = None) -> None:
        self._sink.emit(kind, payload, turn_id)

    def _settings(self) -> RequestSettings:
        return RequestSettings(
            model=self.config.model,
            effort=self._thinking.value,
            fast_mode=self._fast_mode,
            store=self.config.store,
            prompt_cache_key=self.config.cache_key,
            session_id=self.config.session_id,
        )

    def _build_tools(self) -> Tools:
        config = self.config
        if config.tools_factory is not None:
            tools = config.tools_factory(self.handle)
            if not isinstance(tools, Tools):
                raise ConfigError("tools_factory must return a ta.Tools")
            return tools
        return config.tools if config.tools is not None else Tools.default()

    def context_message(self) -> dict[str, Any]:
        return context_user_message(self.workspace)

    @property
    def nursery(self) -> trio.Nursery:
        return self._nursery

    def tool_runner_for(self, call: dict[str, Any], state: TurnState, model_call_index: int, stats: TurnStats) -> Any:
        return self.dispatcher.runner_for(call, state, model_call_index, stats)

    def run_started_payload(self, state: TurnState) -> dict[str, Any]:
        return run_started_payload(self.config, self.workspace, state)

    def terminal_payload(self, state: TurnState, stats: TurnStats, start: float, status: str) -> dict[str, Any]:
        # Transport counters are reported as the delta since the previous terminal event.
        mark, self._terminal_mark = self._terminal_mark, self.model.stats.copy()
        return terminal_payload(self.config, state, stats, self.model.stats, mark, start, status)

    # -- lifecycle -----------------------------------------------------------------------

    async def _run_turns(self) -> None:
        try:
            async for state in self._queue_receive:
                await run_turn(self, state)
                self._pending.remove(state)
        finally:
            # Only reached with turns left when the agent is cancelled: each accepted turn
            # still gets exactly one terminal event and resolves as cancelled.
            for state in self._pending:
                if not state.terminal_emitted:
                    emit_cancelled_without_running(self, state)

    async def _startup(self) -> None:
        self._nursery.start_soon(self._run_turns)
        if self.config.responses.transport is Transport.WEBSOCKET and not self._seeded:
            await self._nursery.start(self.model.warmup, self._settings())

    def _stop_accepting(self) -> None:
        self._closing = True
        self._queue_send.close()

    async def _shutdown(self) -> None:
        self._stop_accepting()
        self.model.close()
        await self.dispatcher.aclose()
        await self.model.aclose()
        if self._rollout is not None:
            self.persist_rollout()
            self._rollout.close()


def open_agent(config: AgentConfig) -> AbstractAsyncContextManager[Agent]:
    """Run an agent for the duration of the block.

    On entry the agent starts its warmup (WebSocket) without waiting for the network.
    Leaving the block normally waits for every accepted turn to finish, then closes the
    socket and ends ``agent.events``. If the enclosing scope is cancelled, the live turn
    is cancelled (tools killed, terminal event emitted) and queued turns are resolved
    as cancelled; nothing started by the agent outlives the block.

    An exception raised in the block cancels the agent the same way and then propagates
    as itself (not wrapped in an ``ExceptionGroup``) when it is the only error.
    """
    if not isinstance(config, AgentConfig):
        raise ConfigError(f"open_agent() takes a ta.AgentConfig, got {type(config).__name__}")
    return _open_agent(config)


@asynccontextmanager
async def _open_agent(
    config: AgentConfig,
    seed: ConversationSnapshot | None = None,
    parent_id: str | None = None,
    lineage_id: str | None = None,
) -> AsyncIterator[Agent]:
    sink_owner: list[Agent] = []
    try:
        async with trio.open_nursery() as nursery:
            agent = Agent(config, nursery, seed, parent_id, lineage_id)
            sink_owner.append(agent)
            try:
                await agent._startup()
                yield agent
                agent._stop_accepting()
                await _wait_turns(agent)
            except BaseException:
                nursery.cancel_scope.cancel()  # an error or cancellation in the block: stop the turns
                raise
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_GRACE):
                    await agent._shutdown()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            raise group.exceptions[0] from None
        raise
    finally:
        # Only now, with every task of the agent finished (terminal events of cancelled
        # turns included), does the event stream end.
        for owner in sink_owner:
            owner._sink.close()


async def _wait_turns(agent: Agent) -> None:
    for state in list(agent._pending):
        await state.done.wait()
