"""``open_agent`` and the ``Agent``: the agent's nursery and its public surface.

Concurrency shape (DESIGN "Concurrency shape"): ``open_agent`` owns one nursery that
holds the startup warmup (started with ``nursery.start``, so it holds the model lock
before any turn can run), the socket tasks, the cells and shell sessions of the
tools, and the turn runner, which executes accepted turns one at a time, FIFO.
Leaving the ``async with`` block normally stops accepting prompts and waits for
every accepted turn to finish (nursery semantics); then the socket is closed and
``agent.events`` ends. Cancelling the enclosing scope cancels the live turn (which
still emits its terminal ``run.failed`` with status ``cancelled``); queued turns are
then resolved as cancelled without running.

``Agent`` is only the SPEC surface, a facade: ``AgentParts`` (``_assembly``) wires the
parts -- the ``TurnLedger`` (the one writer of history, ``_session``), the
``ModelClient`` (transport and chain), the ``ToolDispatcher``, the ``TurnQueue``, the
``TurnRunner`` and the rollout -- and none of them holds a reference back to it. Its
children come from ``_children.ChildFactory``, its block is ``_lifecycle.run_agent``,
and what its owner (``Workers``, ``ThreadManager``) may do beyond the public surface is
``_hosting.HostHooks`` (``agent._host``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast, final

import trio

from .._base.handle import AgentHandle
from .._config import AgentConfig, Thinking, _approval, _sandbox
from .._errors import AgentClosed, ConfigError, InvalidPrompt
from .._events import AgentEvents
from .._tools._security import ApprovalPolicy, Approvals, Sandbox, SandboxMode
from ._assembly import AgentParts
from ._calls._collaboration import MailAddress
from ._children import Origin
from ._construction import NoPublicConstructor, construct
from ._identity import Rollout
from ._lifecycle import run_agent
from ._turns import _pending_input
from ._turns._input import Mail, agent_message
from ._turns._prompt_input import checked_prompt, turn_input
from ._turns._turn import Prompt, Turn, TurnResult

if TYPE_CHECKING:
    from .._wire.output_schema import OutputSchemaLike
    from ._statistics import AgentStatistics
    from ._turns._idle_sleep import Sleep
    from ._turns._submission import Declined, Submission

__all__ = ["Agent", "open_agent"]


@final
class Agent(metaclass=NoPublicConstructor):
    """A running agent; create it with ``open_agent``. See the module docstring."""

    _how_to_get: ClassVar[str] = "open one with `async with ta.open_agent(config) as agent:`"

    def __init__(self, origin: Origin, nursery: trio.Nursery) -> None:
        self._config = origin.config  # session_id: the handle answers it inside tools_factory
        self._path = origin.path
        self._parent = origin.parent  # the address of the agent this one was spawned or forked from
        # Mail from the agents of the tree (post_to_parent) is delivered unrecorded: a
        # replay produces it again on its own; the application's post_mail is an input.
        self._address = MailAddress(origin.path, self._deliver_mail)
        self._handle = AgentHandle(self)
        # The handle (weak, refusing once closing) makes the workers; what it opens is
        # typed ``AgentLike`` below the runtime, and is this class's ``spawn``: an Agent.
        spawn = cast("Callable[[str], AbstractAsyncContextManager[Agent]]", self._handle.spawn)
        parts: AgentParts[Agent] = AgentParts(origin, nursery, address=self._address, handle=self._handle,
                                              spawn=spawn, opener=_open_agent)
        self._parts = parts
        self._current, self._sink = parts.current, parts.sink
        self._queue, self._tools, self._guard, self._runner = parts.queue, parts.tools, parts.guard, parts.runner
        self._rollout, self._children, self._collaboration = parts.rollout, parts.children, parts.collaboration
        self._ledger = parts.ledger  # (the app server's rollback rewrites it: _serve/_rollback.py)
        self._host = parts.host  # for its owner: Workers, ThreadManager

    @classmethod
    def _create(cls, origin: Origin, nursery: trio.Nursery) -> Agent:
        return construct(cls, origin, nursery)

    @property
    def sandbox(self) -> SandboxMode:
        """The sandbox mode commands run in (after the default's fallback, if any)."""
        return self._guard.sandbox.mode

    @property
    def sandbox_settings(self) -> Sandbox:
        """The effective sandbox: mode, network, writable roots (after any fallback)."""
        return self._guard.sandbox

    @property
    def approval_policy(self) -> ApprovalPolicy:
        """The approval policy calls are decided by now."""
        return self._guard.approvals.policy

    async def set_permissions(
        self, *, sandbox: Sandbox | SandboxMode | str | None, approval: Approvals | ApprovalPolicy | str
    ) -> None:
        """Confine commands and decide approvals differently from now on: the calls a
        running turn makes next and every later turn (a command already running keeps
        its sandbox). ``sandbox`` and ``approval`` take what ``AgentConfig`` takes
        (``None``: the default, which falls back to ``danger-full-access`` where no
        sandbox works). When they change what the model was told, the next turn
        starts with a new permissions message. Raises ``SandboxUnavailable`` -- and
        changes nothing -- when an explicit mode cannot work here, ``ConfigError`` for a
        value ``AgentConfig`` would refuse."""
        await trio.lowlevel.checkpoint()
        requested, approvals = _sandbox(sandbox), _approval(approval)
        told = self._guard.permissions_message()
        self._guard.reconfigure(requested, approvals)
        if self._guard.permissions_message() != told:
            self._runner.permissions_changed()

    @property
    def session_id(self) -> str:
        return self._config.session_id

    @property
    def events(self) -> AgentEvents:
        """Every event of this agent, in order; the iteration ends after the agent closed."""
        return self._sink.stream

    @property
    def thinking(self) -> Thinking:
        return self._current.thinking

    @property
    def fast_mode(self) -> bool:
        return self._current.fast_mode

    @property
    def model(self) -> str:
        """The model of prompts accepted now (``AgentConfig.model`` until ``set_model``)."""
        return self._current.model

    @property
    def closing(self) -> bool:
        """True once the agent's block is closing (no new prompts are accepted)."""
        return self._queue.closing

    async def set_thinking(self, thinking: Thinking) -> None:
        """Reasoning effort for prompts accepted from now on."""
        if not isinstance(thinking, Thinking):
            raise ConfigError(f"thinking must be a ta.Thinking, got {thinking!r}")
        await trio.lowlevel.checkpoint()
        self._current.thinking = thinking

    async def set_fast_mode(self, enabled: bool) -> None:
        """``service_tier: "priority"`` for prompts accepted from now on."""
        await trio.lowlevel.checkpoint()
        self._current.fast_mode = bool(enabled)

    async def set_model(self, model: str) -> None:
        """The model of prompts accepted from now on (a turn keeps the one current when
        it was accepted, as it keeps its thinking). History, the chain of responses
        and the prompt cache key carry over; the auto-compaction limit follows the
        turn's model; forks and children start with it. Raises ``ConfigError`` for
        anything but a non-empty string."""
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"model must be a non-empty string such as 'gpt-5.5', got {model!r}")
        await trio.lowlevel.checkpoint()
        self._current.model = model

    def statistics(self) -> AgentStatistics:
        """Counters of this agent as a frozen value (cheap; never blocks)."""
        return self._parts.statistics()

    async def flush_telemetry(self) -> None:
        """Hand what tracing deferred to the providers now: the spans and metric
        recordings of this agent's ended turns and model calls, which otherwise reach
        them when the process next idles (a second later at most), after ~64 turns, or
        when the agent closes (``docs/tracing.md``). A no-op without ``tracing=``."""
        await trio.lowlevel.checkpoint()
        self._parts.observers.flush()

    # -- turns and pending input ---------------------------------------------------------

    async def prompt(self, prompt: str | Prompt, *, output_schema: OutputSchemaLike | None = None) -> Turn:
        """Accept a prompt; returns once it is queued (prompts run one at a time, FIFO).

        The turn keeps the model, thinking and fast mode current *now*, even if they
        change before it runs. ``output_schema`` (a ``ta.OutputSchema``, or a JSON
        Schema dict whose root is ``{"type": "object", ...}``) asks for structured
        output: this turn's requests carry it as ``text.format`` and its
        ``final_message`` is the JSON text; later turns are unconstrained. Raises
        ``InvalidPrompt`` for empty text, ``ConfigError`` for a schema that cannot be
        sent, and ``AgentClosed`` once the agent's block is closing.
        """
        settings = self._current.request(output_schema)
        # Trio's pattern for an operation that succeeds at once (a socket send): a cancel
        # point before it, a schedule point after it, so the runner woken by ``accept``
        # starts the turn in the same scheduler round as this caller resumes.
        await trio.lowlevel.checkpoint_if_cancelled()
        turn = Turn._create(self._queue.accept(checked_prompt(prompt), settings), self._queue)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return turn

    async def compact(self) -> Turn:
        """Compact the conversation now, as a turn of its own; returns once it is queued.

        It is queued like a prompt (FIFO: it runs when the turns accepted before it have
        ended, and turns accepted after it wait for it), whatever the size of the
        context. It compacts as the automatic compaction does (``model.compaction.*``
        events): a remote compaction request, or -- once the server has shown it offers
        none (``model.compaction.fallback``) -- a local one, a summarization request
        whose text answer becomes the summary; the next request replays the compacted
        history in full. It takes no steers
        (``TurnNotSteerable``; ``submit`` starts a turn after it instead) and can be
        cancelled like any turn. ``result()`` is a ``TurnResult`` with an empty
        ``final_message``, or ``TurnFailed`` when the compaction failed (history is
        then unchanged). Raises ``AgentClosed`` once the agent's block is closing."""
        await trio.lowlevel.checkpoint()
        state = self._queue.accept(None, self._current.request(), compact=True)
        self._queue.compact_requested(state)
        return Turn._create(state, self._queue)

    async def submit(
        self, given: str | Prompt | Sequence[dict[str, Any]], *, output_schema: OutputSchemaLike | None = None
    ) -> Submission:
        """Steer the running turn if it can still take a steer, else start a turn;
        returns which (``Submission.kind``) and the turn. ``given`` is text, a
        ``Prompt``, or a list of raw Responses items: items join the running turn like
        ``inject``, or start an *automatic* turn whose input they are, sent unchanged.
        ``output_schema`` is the started turn's (as ``prompt``); a steer joins a turn
        that keeps its own, as codex's ``turn/start`` on a busy thread does."""
        settings = self._current.request(output_schema)
        return await _pending_input.submit(self._queue, turn_input(given), settings)

    async def start_if_idle(
        self, given: str | Prompt | Sequence[dict[str, Any]], *, output_schema: OutputSchemaLike | None = None
    ) -> Turn | Declined:
        """Start a turn only if nothing is running or queued; otherwise return
        ``Declined(reason)`` and record nothing. Takes text, a ``Prompt`` or raw items
        (as ``submit``), and the started turn's ``output_schema`` (as ``prompt``)."""
        settings = self._current.request(output_schema)
        return await _pending_input.start_if_idle(self._queue, turn_input(given), settings)

    @property
    def path(self) -> str:
        """This agent's address for mail: ``/root``, a named child ``/root/<name>``."""
        return self._path

    async def post_mail(self, author: str, text: str, *, trigger_turn: bool = False) -> Turn | None:
        """Mail from agent ``author`` (a path such as ``/root/worker``) to this agent.

        It reaches the model as an ``agent_message`` item. Queue-only mail
        (``trigger_turn=False``) joins the running turn at its next request boundary --
        and may cut a response short right after a reasoning item or a commentary
        message -- or waits for the next turn, whose first request carries it; it never
        reopens a turn whose final answer is out. Triggering mail starts an automatic
        turn when the agent is idle (returned), or when the running turn ends. Any mail
        to a sleeping agent (``sleep``) wakes it into an automatic turn (returned).
        Raises ``MailboxFull`` when
        ``MAILBOX_CAPACITY`` messages are already waiting, and ``AgentClosed`` when no
        turn of this agent can read the mail any more: it has closed, or its block is
        closing with no turn running or queued (mail while its last turns finish still
        joins them, as it would before).
        """
        turn = await self._deliver_mail(author, text, trigger_turn=trigger_turn)
        self._queue.mailed(author, text, bool(trigger_turn), turn.turn_id if turn is not None else None)
        return turn

    async def _deliver_mail(self, author: str, text: str, *, trigger_turn: bool = False) -> Turn | None:
        """``post_mail`` without telling the observers (mail from the agents of the tree)."""
        if not isinstance(author, str) or not author.startswith("/"):
            raise InvalidPrompt(f"mail needs an author path such as '/root/worker', got {author!r}")
        if not isinstance(text, str) or not text.strip():
            raise InvalidPrompt("mail needs non-empty text")
        await trio.lowlevel.checkpoint()
        if self._queue.closing and self._queue.idle:
            # Nothing will ever take it: a closing queue starts no turn for mail.
            raise AgentClosed(f"agent {self._path} has closed; mail to it cannot be delivered")
        mail = Mail(agent_message(author, self._path, text), trigger_turn=bool(trigger_turn))
        started = self._queue.post_mail(mail, self._current.request())
        return Turn._create(started, self._queue) if started is not None else None

    async def sleep(self, seconds: float) -> Sleep:
        """Put the idle agent to sleep between turns; returns at once with the ``Sleep``.

        While it sleeps, mail posted to it -- queue-only mail too -- wakes it into a new
        automatic turn (``post_mail`` returns it) whose input is all the waiting mail, and
        which runs with the settings of the turn before the sleep (model, thinking, fast
        mode as that turn was accepted with; not its output schema), or with the agent's
        settings at this call when no turn ran before it (codex.md 3.2: queue-only mail
        "wakes a durable sleep"). The sleep also ends when a turn is accepted otherwise
        (``prompt``, ``submit``, ``start_if_idle``, ``compact``: that turn keeps its own
        settings and takes the waiting mail), when ``seconds`` have passed (then nothing
        else happens: the agent is awake and idle, and mail waits for the next turn
        again), on ``Sleep.cancel()``, and when the agent's block closes. Mail already
        waiting wakes it at once. ``agent.asleep`` and ``agent.woke`` say when it fell
        asleep and why it woke; ``await sleep.woken()`` returns the same (a ``Wakeup``).
        The sleep's timer is a task in the agent's nursery and ends with the sleep; the
        sleep is not durable (neither in the rollout nor resumed).

        ``seconds`` is a number above 0 (``math.inf``: no time limit; ``ConfigError``
        otherwise). Raises ``SleepRefused`` while a turn runs or is queued, or when the
        agent is asleep already, and ``AgentClosed`` once its block is closing.
        """
        from ._turns._idle_sleep import Sleep, checked_seconds, start_sleep  # the first sleep loads it

        duration = checked_seconds(seconds)
        await trio.lowlevel.checkpoint()
        state = start_sleep(self._queue, self._parts.nursery, self._sink.emit, duration, self._current.request())
        return Sleep._create(state, self._queue)

    async def inject(self, items: Sequence[dict[str, Any]]) -> Literal["joined", "queued"]:
        """Raw Responses items for the model: they join the running turn at its next
        request (``"joined"``), or the next turn's first request (``"queued"``)."""
        return await _pending_input.inject(self._queue, items)

    async def interrupt_if_no_pending_input(self, turn_id: int) -> bool:
        """Cancel running turn ``turn_id`` only if no input waits for it (no pending
        steer, no queued prompt); True if it did. Answers before the cancellation
        completes, so the turn's own tools may call it."""
        await trio.lowlevel.checkpoint()
        return _pending_input.interrupt_if_no_pending_input(self._queue, turn_id)

    async def post_to_parent(self, text: str, *, trigger_turn: bool = False) -> Turn | None:
        """Mail from this agent to the agent it was spawned or forked from: an
        ``agent_message`` with ``author`` = this ``path`` and ``recipient`` = the
        parent's, delivered as ``post_mail`` delivers it there (queue-only by default;
        ``trigger_turn=True`` starts a parent turn when the parent is idle, returned).
        Raises ``InvalidPrompt`` on the root agent (it has no parent) and
        ``AgentClosed`` once the parent has closed."""
        if self._parent is None:
            raise InvalidPrompt(f"agent {self._path} has no parent to post to; post_to_parent is for "
                                "children from spawn() or fork()")
        return await self._parent.post(self._path, text, trigger_turn=trigger_turn)

    # -- sessions and rollouts -----------------------------------------------------------

    @property
    def rollout(self) -> Rollout | None:
        """The rollout file (``.path``) when ``AgentConfig(rollout=...)`` is set."""
        return self._rollout

    async def flush_rollout(self) -> None:
        """Make every committed item durable: fsync the rollout (``RolloutError`` on failure)."""
        await trio.lowlevel.checkpoint()
        if self._rollout is not None:
            self._rollout.flush()

    # -- forks and children ----------------------------------------------------------------

    def fork(self) -> AbstractAsyncContextManager[Agent]:
        """``async with agent.fork() as branch``: a child from the latest boundary.

        The branch inherits the committed history plus the live turn's committed delta
        (its prompt, finished tool outputs and joined steers), chains on the last
        completed response, keeps the lineage's prompt cache key, gets its own session
        id and connection (no warmup) and the agent's current thinking. It runs
        concurrently with this agent; leaving the block closes it like ``open_agent``.
        Raises ``ForkBeforeCompletedTurn`` before the first model boundary.
        """
        return self._children.fork()

    def fork_from(self, result: TurnResult) -> AbstractAsyncContextManager[Agent]:
        """``async with agent.fork_from(result) as branch``: a child from the end of that
        turn; it chains on the turn's final response and nothing later leaks in."""
        return self._children.fork_from(result)

    def spawn(self, name: str | None = None) -> AbstractAsyncContextManager[Agent]:
        """``async with agent.spawn() as child``: a clean child -- no history, same
        instructions and explicit prompt cache key, current thinking, a new session id;
        it warms up on its own. Its mail ``path`` is ``<this path>/<name>`` (default
        ``child-N``); it reaches this agent with ``child.post_to_parent(text)``, and this
        agent reaches it with ``child.post_mail(agent.path, text)``."""
        return self._children.spawn(name)

    # -- lifecycle (the block, _lifecycle.run_agent) -----------------------------------------

    async def _startup(self) -> None:
        await self._parts.startup()

    async def _wait_turns(self) -> None:
        await self._parts.wait_turns()

    async def _shutdown(self) -> None:
        await self._parts.shutdown()

    def _close_rollout(self) -> None:
        self._parts.close_rollout()


def open_agent(config: AgentConfig, *, warmup: bool = True) -> AbstractAsyncContextManager[Agent]:
    """Run an agent for the duration of the block.

    On entry the agent starts its warmup (WebSocket) without waiting for the network.
    ``warmup=False`` is for a caller whose first prompt is already in hand (``trio-agent
    run``): the agent opens its socket at startup but sends no ``generate: false``
    warmup, so that prompt goes out as soon as the socket is open (a full first request)
    rather than after the warmup's round trip; and over a WebSocket that socket starts
    before the agent is built (its connect and handshake travel while the tools, the
    rollout and the permissions are set up), unless the agent is a fork, a resumed
    session or observed by a tracer or a cassette. A prompt sent right after opening an
    agent with the default ``warmup=True`` waits for the warmup and chains on it.
    Leaving the block normally waits for every accepted turn to finish, then closes the
    socket and ends ``agent.events``. If the enclosing scope is cancelled, the live turn
    is cancelled (tools killed, terminal event emitted) and queued turns are resolved
    as cancelled; nothing started by the agent outlives the block.

    An exception raised in the block cancels the agent the same way and then propagates
    as itself (not wrapped in an ``ExceptionGroup``) when it is the only error.
    """
    if not isinstance(config, AgentConfig):
        raise ConfigError(f"open_agent() takes a ta.AgentConfig, got {type(config).__name__}")
    return _open_agent(Origin(config, warmup=warmup))


def _open_agent(origin: Origin) -> AbstractAsyncContextManager[Agent]:
    """The block of an agent opened from ``origin`` (the root's, or a child's: ``_children``)."""
    return run_agent(origin, Agent._create)
