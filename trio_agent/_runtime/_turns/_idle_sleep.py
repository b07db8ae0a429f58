"""An idle agent's sleep between turns (``Agent.sleep``), and the mail that wakes it.

Why: codex.md 3.2 -- queue-only mail "is delivered with the next turn, or wakes a
durable sleep" (seed ``queue_only_agent_mail_wakes_sleeping_root_with_previous_turn_context``).
An agent that waits for its workers finishes its turn and sleeps; the mail a worker
posts when done starts the turn that reads it. Without a sleep, queue-only mail to an
idle agent only waits for the next turn someone else starts (the seeds' other cases
require that), so the sleep is what tells the two apart.

Theory of operation. ``start_sleep`` (the caller's task) refuses unless the agent is
idle and open (``SleepRefused``, ``AgentClosed``) and records the sleep on the queue
(``TurnQueue.sleep``); a sleeping agent is idle by construction, since everything that
queues a turn ends the sleep first. It ends exactly once (``IdleSleep.end``, through
``TurnQueue.end_sleep``), for the first of:

- ``mail``: any mail (queue-only or triggering) wakes it into an automatic turn whose
  input is all the waiting mail -- the path triggering mail takes when the agent is idle
  (``TurnQueue.post_mail``) -- run with the settings the sleep captured: those of the
  turn before the sleep (model, thinking, fast mode; not its output schema), or the
  agent's current ones when no turn ran before it. Settings changed during the sleep
  apply to the turns accepted after the wake-up, as they would to any prompt. Mail
  already waiting when the sleep is asked for wakes it at once.
- ``turn``: a turn is accepted otherwise (``prompt``, ``submit``, ``start_if_idle``,
  ``compact``); that turn runs with its own settings and takes the waiting mail.
- ``timeout``: the time ran out. Nothing else happens: the agent is idle and awake, and
  mail waits for the next turn again.
- ``cancelled``: ``Sleep.cancel()``; ``closed``: the agent's block is closing (the queue
  closes) or its nursery is cancelled.

The sleep's timer is one task in the agent's nursery that ends with the sleep, so no
task outlives it and closing the agent never waits for a sleep's time to run out. The
events ``agent.asleep`` and ``agent.woke`` say when it fell asleep and why it woke. A
sleep is not durable: it is not in the rollout, and a resumed session starts awake.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, final

import attrs
import trio

from ..._errors import AgentClosed, AgentError, ConfigError
from ..._events import EventKind
from ..._units import ns
from .._construction import NoPublicConstructor, construct
from ._turn import QueuedTurns, Turn

if TYPE_CHECKING:
    from ..._wire.request import RequestSettings
    from ._input import Mailbox
    from ._turn import TurnState

__all__ = [
    "IdleSleep", "Sleep", "SleepRefused", "SleepingQueue", "WakeReason", "Wakeup", "checked_seconds", "start_sleep",
]

WakeReason = Literal["mail", "turn", "timeout", "cancelled", "closed"]


class SleepRefused(AgentError):
    """Raised by ``Agent.sleep`` when the agent cannot fall asleep now: a turn is
    running or queued, or it is asleep already."""


def checked_seconds(seconds: object) -> float:
    """How long a sleep may last: a number of seconds above 0 (``math.inf``: until
    something wakes it)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds) or seconds <= 0:
        raise ConfigError(f"sleep takes a number of seconds above 0 (math.inf: no time limit), got {seconds!r}")
    return float(seconds)


class SleepingQueue(QueuedTurns, Protocol):
    """What a sleep uses of the turn queue (``TurnQueue``, which imports this module)."""

    sleep: IdleSleep | None
    last_settings: RequestSettings | None
    mailbox: Mailbox
    running: TurnState | None

    @property
    def closing(self) -> bool: ...

    @property
    def idle(self) -> bool: ...

    @property
    def queued(self) -> int: ...

    def wake_for_mail(self, sleep: IdleSleep) -> TurnState: ...

    def end_sleep(self, sleep: IdleSleep, reason: WakeReason, turn: TurnState | None = None) -> None: ...


class IdleSleep:
    """One sleep's state: how it ends is decided once (``end``), by whoever ends it first."""

    __slots__ = ("_emit", "ended", "reason", "seconds", "settings", "slept", "started", "turn")

    def __init__(self, seconds: float, settings: RequestSettings, emit: Callable[..., Any]) -> None:
        self.seconds = seconds
        self.settings = settings  # what the wake-up turn runs with
        self.started = trio.current_time()
        self.reason: WakeReason | None = None
        self.turn: TurnState | None = None  # the turn it woke for (mail, turn)
        self.slept = 0.0
        self.ended = trio.Event()
        self._emit = emit
        emit(EventKind.AGENT_ASLEEP, {"seconds": None if math.isinf(seconds) else seconds}, None)

    @property
    def asleep(self) -> bool:
        return self.reason is None

    def end(self, reason: WakeReason, turn: TurnState | None = None) -> None:
        """End it (``agent.woke``), unless it has ended already. Only the queue calls
        this (``TurnQueue.end_sleep``), which also forgets the sleep."""
        if self.reason is not None:
            return
        self.reason, self.turn = reason, turn
        self.slept = trio.current_time() - self.started
        payload: dict[str, Any] = {"reason": reason, "slept_ns": ns(self.slept)}
        if turn is not None:
            payload["turn_id"] = turn.turn_id
        self._emit(EventKind.AGENT_WOKE, payload, None)
        self.ended.set()


async def _timer(sleep: IdleSleep, queue: SleepingQueue) -> None:
    """The sleep's one task (in the agent's nursery): ends it when its time runs out,
    and ends itself as soon as anything else ended it."""
    try:
        with trio.move_on_at(sleep.started + sleep.seconds):
            await sleep.ended.wait()
    except trio.Cancelled:  # the agent's nursery is cancelled: it closes
        queue.end_sleep(sleep, "closed")
        raise
    queue.end_sleep(sleep, "timeout")


def start_sleep(queue: SleepingQueue, nursery: trio.Nursery, emit: Callable[..., Any], seconds: float,
                current: RequestSettings) -> IdleSleep:
    """Put the idle agent to sleep, or raise why it cannot (see the module docstring).
    ``current``: the agent's settings now, for a wake-up turn when no turn ran before."""
    if queue.closing:
        raise AgentClosed("the agent is closing; it cannot fall asleep (open a new agent)")
    if queue.sleep is not None:
        raise SleepRefused(
            "the agent is asleep already; wait for that sleep to end (Sleep.woken()) or end it "
            "(Sleep.cancel()) before asking for another"
        )
    if not queue.idle:
        busy = [f"turn {queue.running.turn_id} is running"] if queue.running is not None else []
        if queue.queued:
            busy.append(f"{queue.queued} {'turn is' if queue.queued == 1 else 'turns are'} queued")
        raise SleepRefused(f"only an idle agent can sleep, and {' and '.join(busy)}; wait for its turns to "
                           "end (await turn.result()) and call sleep() then")
    previous = queue.last_settings
    settings = previous.without_output_schema() if previous is not None else current.without_output_schema()
    sleep = IdleSleep(seconds, settings, emit)
    queue.sleep = sleep
    if len(queue.mailbox):
        queue.wake_for_mail(sleep)  # mail is waiting: it wakes at once
    else:
        nursery.start_soon(_timer, sleep, queue)
    return sleep


@final
@attrs.frozen
class Wakeup:
    """How a sleep ended: ``reason`` (see ``Agent.sleep``), the ``turn`` it woke for
    (``"mail"``: the wake-up turn; ``"turn"``: the turn that was accepted; else None)
    and how many seconds it ``slept``."""

    reason: WakeReason
    turn: Turn | None
    slept: float


@final
class Sleep(metaclass=NoPublicConstructor):
    """A sleep of an idle agent, returned by ``await agent.sleep(seconds)``."""

    _how_to_get: ClassVar[str] = "await agent.sleep(seconds) returns one"

    def __init__(self, state: IdleSleep, queue: SleepingQueue) -> None:
        self._state = state
        self._queue = queue
        self._wakeup: Wakeup | None = None

    @classmethod
    def _create(cls, state: IdleSleep, queue: SleepingQueue) -> Sleep:
        return construct(cls, state, queue)

    @property
    def seconds(self) -> float:
        """The longest it lasts (``math.inf``: no time limit)."""
        return self._state.seconds

    @property
    def asleep(self) -> bool:
        """True until it ends."""
        return self._state.asleep

    @property
    def wakeup(self) -> Wakeup | None:
        """How it ended; None while the agent sleeps."""
        state = self._state
        if self._wakeup is None and state.reason is not None:
            turn = Turn._create(state.turn, self._queue) if state.turn is not None else None
            self._wakeup = Wakeup(state.reason, turn, state.slept)
        return self._wakeup

    async def woken(self) -> Wakeup:
        """Wait for the sleep to end; how it ended (the wake-up turn, if any, is
        ``.turn``: await its ``result()`` for the answer)."""
        await self._state.ended.wait()
        wakeup = self.wakeup
        assert wakeup is not None
        return wakeup

    async def cancel(self) -> None:
        """End the sleep now without a turn (``reason="cancelled"``); the agent is idle
        and awake, and mail waits for the next turn again. Does nothing when it has
        ended already."""
        await trio.lowlevel.checkpoint()
        self._queue.end_sleep(self._state, "cancelled")
