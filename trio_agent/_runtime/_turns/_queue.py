"""The turn queue: accepted turns, their ids, the running turn, and input waiting for it.

Theory of operation (SPEC sec. 4 and 10): ``accept`` queues a turn FIFO and returns at
once; the runner takes turns one at a time with ``next()`` and reports each back with
``finished``. Cancelling a queued turn (``cancel_queued``) removes it from the queue
and emits its terminal event right away, so it never counts as pending input and
nobody waits on the runner to learn it ended.

Input that waits: items injected while nothing runs (``idle_items``, for the next
turn's first request) and the agent's ``mailbox``. Queue-only mail waits for a
request boundary of a turn; triggering mail starts an *automatic* turn when the agent
is idle (at once, or when the running turn ends). Every arrival is counted on the
shared ``activity`` signal, which ``clock.sleep`` and ``wait_agent`` watch. ``close``
stops accepting; ``next()`` then returns None once the queue is empty, and turns left
behind by a cancelled agent are resolved by ``cancel_remaining``.

An idle agent may sleep (``sleep``, ``_idle_sleep``): then any mail wakes it into an
automatic turn run with the settings the sleep captured (``wake_for_mail``), a turn
accepted otherwise ends the sleep, and so does ``close``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ..._errors import AgentClosed, TurnCancelled
from ..._wire.request import RequestSettings
from .._observers import Observers
from ._input import InputActivity, Mail, Mailbox
from ._reporter import TurnReporter
from ._turn import Prompt, TurnState, TurnStatus

if TYPE_CHECKING:
    from ._idle_sleep import IdleSleep, WakeReason

__all__ = ["TurnQueue"]


def _cancelled(state: TurnState) -> TurnCancelled:
    return TurnCancelled(f"turn {state.turn_id} was cancelled")


class TurnQueue:
    def __init__(self, reporter: TurnReporter, observers: Observers | None = None) -> None:
        self._reporter = reporter
        self._observers = observers  # told each accepted turn and each steer as submitted (the observer seam)
        self._next_id = 0
        self._queued: collections.deque[TurnState] = collections.deque()
        self.running: TurnState | None = None
        self.idle_items: list[dict[str, Any]] = []
        self.mailbox = Mailbox()
        self.activity = InputActivity()
        self._closing = False
        self._wakeup = trio.Event()
        self._automatic_settings: RequestSettings | None = None
        self.last_status: TurnStatus | None = None  # how the latest turn that ran ended
        self.last_settings: RequestSettings | None = None  # what the latest turn that ran was accepted with
        self.sleep: IdleSleep | None = None  # the idle agent's sleep (Agent.sleep), while it sleeps
        # Told each automatic turn it accepts, in the accepting task (a worker's owner reports it).
        self.on_automatic: Callable[[TurnState], None] | None = None

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def accepted(self) -> int:
        """How many turns were accepted so far (turn ids count from 1)."""
        return self._next_id

    @property
    def queued(self) -> int:
        return len(self._queued)

    @property
    def idle(self) -> bool:
        """Nothing running and nothing queued."""
        return self.running is None and not self._queued

    def accept(self, prompt: Prompt | None, settings: RequestSettings, items: tuple[dict[str, Any], ...] = (),
               mail: tuple[dict[str, Any], ...] = (), *, compact: bool = False) -> TurnState:
        """Queue a turn: a user turn (``prompt``), an automatic one (raw ``items``, or
        the ``mail`` that started it) or a manual compaction (``compact``)."""
        if self._closing:
            raise AgentClosed("the agent is closing; open a new agent to send more prompts")
        self._next_id += 1
        # Waiting mail may cut a live response of a turn that samples (not a compaction).
        state = TurnState(self._next_id, prompt, settings, self.activity, items, mail, compact=compact,
                          mail_flag=None if compact else self.mailbox.flag, mail_mark=self.mailbox.posted)
        if self._observers is not None:
            self._observers.accepted(state.turn_id, prompt)
        if self.on_automatic is not None and state.automatic:
            self.on_automatic(state)
        if self.running is not None:
            self.activity.notify("steer")  # user input waits: a sleeping or waiting turn wakes
        self._queued.append(state)
        if self.sleep is not None:
            self.end_sleep(self.sleep, "turn", state)
        self._wake()
        return state

    def post_mail(self, mail: Mail, settings: RequestSettings) -> TurnState | None:
        """Take ``mail``; returns the automatic turn it started (triggering mail to an
        idle agent, or any mail to a sleeping one)."""
        self.mailbox.post(mail)
        self.activity.notify("mail")
        self._automatic_settings = settings
        if self.sleep is not None:
            return self.wake_for_mail(self.sleep)
        return self.start_for_mail()

    def wake_for_mail(self, sleep: IdleSleep) -> TurnState:
        """Mail wakes the sleeping agent: an automatic turn takes all the waiting mail as
        its input (as ``start_for_mail``), with the settings the sleep captured."""
        self.sleep = None  # first: accepting the turn must not end the sleep as "turn"
        mail = tuple(m.item for m in self.mailbox.take_all())
        state = self.accept(None, sleep.settings, mail=mail)
        sleep.end("mail", state)
        return state

    def end_sleep(self, sleep: IdleSleep, reason: WakeReason, turn: TurnState | None = None) -> None:
        """End ``sleep`` for ``reason`` (nothing if it has ended already)."""
        if self.sleep is sleep:
            self.sleep = None
        sleep.end(reason, turn)

    def start_for_mail(self) -> TurnState | None:
        """Start an automatic turn when triggering mail waits and the agent is idle."""
        if not self.mailbox.has_trigger or not self.idle or self._closing or self._automatic_settings is None:
            return None
        # The turn takes all waiting mail as its own input: it is delivered by this turn
        # (or recorded by it if it fails), so it can never start a second one.
        mail = tuple(m.item for m in self.mailbox.take_all())
        return self.accept(None, self._automatic_settings, mail=mail)

    def cancel_queued(self, state: TurnState) -> None:
        """A queued turn never runs: it leaves the queue and ends now (``run.started``,
        ``run.error``, ``run.failed`` with status ``cancelled``)."""
        self._queued.remove(state)
        error = _cancelled(state)
        self._reporter.cancelled_without_running(state, error)
        state.finish(TurnStatus.CANCELLED, error=error)

    async def next(self) -> TurnState | None:
        """The next turn to run, or None once the queue is closed and empty."""
        while not self._queued:
            if self._closing:
                return None
            await self._wakeup.wait()
        self.running = self._queued.popleft()
        self.last_settings = self.running.settings
        return self.running

    def steered(self, state: TurnState, text: str, interrupt: bool) -> None:
        """A steer was submitted to running turn ``state`` (``Turn.steer``)."""
        if self._observers is not None:
            self._observers.steered(state.turn_id, text, interrupt)

    def cancel_requested(self, state: TurnState) -> None:
        """The application cancelled ``state`` (``TurnControl.cancel``), before it ends."""
        if self._observers is not None:
            self._observers.cancel_requested(state.turn_id)

    def compact_requested(self, state: TurnState) -> None:
        """The application asked for compaction turn ``state`` (``Agent.compact``)."""
        if self._observers is not None:
            self._observers.compact_requested(state.turn_id)

    def injected(self, items: list[dict[str, Any]], joined: bool) -> None:
        """The application injected ``items`` (``Agent.inject``)."""
        if self._observers is not None:
            self._observers.injected(items, joined)

    def mailed(self, author: str, text: str, trigger_turn: bool, turn_id: int | None) -> None:
        """The application posted mail (``Agent.post_mail``); ``turn_id``: the turn it started."""
        if self._observers is not None:
            self._observers.mailed(author, text, trigger_turn, turn_id)

    def finished(self, state: TurnState) -> None:
        if self.running is state:
            self.running = None
        self.last_status = state.status
        self.start_for_mail()  # triggering mail that arrived meanwhile starts its own turn

    def close(self) -> None:
        self._closing = True
        if self.sleep is not None:
            self.end_sleep(self.sleep, "closed")
        self._wake()

    def cancel_remaining(self) -> None:
        """Resolve every queued turn as cancelled (the agent is being cancelled)."""
        while self._queued:
            self.cancel_queued(self._queued[0])

    async def wait_all(self) -> None:
        """Wait until every turn accepted so far has ended."""
        while True:
            pending = [state for state in (self.running, *self._queued) if state is not None]
            if not pending:
                await trio.lowlevel.checkpoint()
                return
            await pending[-1].done.wait()

    def take_idle_items(self) -> list[dict[str, Any]]:
        items, self.idle_items = self.idle_items, []
        return items

    def pending_input_for(self, state: TurnState) -> bool:
        """Input is waiting for running turn ``state``: a steer, an injected item, mail,
        a queued prompt, or items injected while idle."""
        return bool(state.pending_count or self._queued or self.idle_items or len(self.mailbox))

    def _wake(self) -> None:
        self._wakeup.set()
        self._wakeup = trio.Event()
