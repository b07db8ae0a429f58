"""One worker as the worker tools (``_workers``) keep it: what they use of its agent
(``WorkerAgent``), its phase across loads and suspensions (``Phase``), its state
(``Worker``), and what its finished turns tell its parent (``turn_text``).

The phases: ``STARTING`` until ``spawn_agent`` returns, then ``LOADED``; ``SUSPENDED``
once its agent closed on an idle unload (its snapshot and unread mail kept);
``LOADING`` while a reload is under way, back to ``LOADED`` (or ``SUSPENDED``, with
``load_error``, when the reload failed). Every change sets ``changed`` (then replaced),
which whoever waits for a reload watches.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import trio

from ..._errors import AgentError, TurnCancelled, TurnFailed
from ..._events import AgentEvents
from ..._session.snapshot import SessionSnapshot

if TYPE_CHECKING:
    from .._turns._input import Mail
    from .._turns._submission import Submission
    from .._turns._turn import Turn

__all__ = ["FAILURE_TEXT_LIMIT", "TURN_BACKLOG", "A", "Phase", "Worker", "WorkerAgent", "discard_events",
           "single_agent_error", "turn_text"]

TURN_BACKLOG = 4  # turns of one worker waiting to be reported (beyond the one being reported)
FAILURE_TEXT_LIMIT = 500  # characters of a failed turn's error in its mail


class _Counters(Protocol):
    @property
    def running_turn(self) -> int | None: ...

    @property
    def turns_queued(self) -> int: ...


class _WorkerHooks(Protocol):
    """What the worker tools use of a worker's ``HostHooks`` (its suspension)."""

    def as_worker(self, *, unload: Callable[[], bool], automatic: Callable[[Turn], None]) -> None: ...

    def suspended_state(self) -> tuple[SessionSnapshot, list[Mail]]: ...

    def restore_mail(self, mail: list[Mail]) -> None: ...


class WorkerAgent(Protocol):
    """What the worker tools use of a worker (an ``Agent``)."""

    @property
    def path(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def events(self) -> AgentEvents: ...

    async def prompt(self, prompt: str) -> Turn: ...

    async def submit(self, given: str) -> Submission: ...

    async def post_mail(self, author: str, text: str, *, trigger_turn: bool = False) -> Turn | None: ...

    async def post_to_parent(self, text: str, *, trigger_turn: bool = False) -> Turn | None: ...

    def statistics(self) -> _Counters: ...

    @property
    def _host(self) -> _WorkerHooks: ...


A = TypeVar("A", bound=WorkerAgent)


class Phase(enum.Enum):
    STARTING = "starting"  # spawn_agent has not returned yet
    LOADED = "loaded"
    SUSPENDED = "suspended"  # its agent is closed; a tool reaching it reloads it
    LOADING = "loading"  # a reload is under way


class Worker(Generic[A]):
    """One worker as its tools keep it, across its loads (see ``_workers``)."""

    __slots__ = (  # noqa: RUF023  # field order
        "name", "path", "agent", "scope", "started", "closed", "turns", "phase", "changed", "unload_wanted",
        "reload_wanted", "reporting", "unload_after_report", "session_id", "snapshot", "held_mail", "load_error",
    )

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self.agent: A | None = None
        self.scope = trio.CancelScope()
        self.started = False  # running in the agent's nursery (spawn_agent has returned)
        self.closed = trio.Event()
        self.turns: trio.MemorySendChannel[Turn] | None = None
        self.phase = Phase.STARTING
        self.changed = trio.Event()  # set (and replaced) at each phase change
        self.unload_wanted = trio.Event()
        self.reload_wanted = trio.Event()
        self.reporting = False  # a finished turn is being reported to the parent
        self.unload_after_report = False  # an unload asked while reporting: done once the reports are
        self.session_id: str | None = None
        self.snapshot: SessionSnapshot | None = None  # while suspended: its history
        self.held_mail: list[Mail] = []  # while suspended: mail it had not read
        self.load_error: AgentError | None = None  # why the latest reload failed

    def set_phase(self, phase: Phase) -> None:
        self.phase = phase
        self.changed.set()
        self.changed = trio.Event()

    def busy(self) -> bool:
        if self.agent is None:
            return self.phase is not Phase.SUSPENDED  # starting or reloading
        stats = self.agent.statistics()
        return stats.running_turn is not None or stats.turns_queued > 0

    def backlog_full(self) -> bool:
        return self.turns is None or self.turns.statistics().current_buffer_used >= TURN_BACKLOG


async def turn_text(turn: Turn) -> str:
    """What a finished worker turn tells its parent."""
    try:
        result = await turn.result()
    except TurnCancelled:
        return "(My turn was cancelled before it finished.)"
    except TurnFailed as exc:
        text = str(exc)
        if len(text) > FAILURE_TEXT_LIMIT:
            text = text[: FAILURE_TEXT_LIMIT - 3] + "..."
        return f"(My turn failed: {text})"
    return result.final_message if result.final_message.strip() else "(My turn ended without a final message.)"


def single_agent_error(group: BaseExceptionGroup[BaseException]) -> AgentError | None:
    while len(group.exceptions) == 1:
        only = group.exceptions[0]
        if isinstance(only, AgentError):
            return only
        if not isinstance(only, BaseExceptionGroup):
            return None
        group = only
    return None


async def discard_events(agent: WorkerAgent) -> None:
    async for _ in agent.events:
        pass
