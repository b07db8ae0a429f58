"""The lifecycle of a turn as a state machine: its phases and every legal transition.

A turn's state (``TurnState``, in ``_turn``) is in exactly one phase. Its public
``TurnStatus`` is derived from the phase:

    phase       the turn                                                   status
    QUEUED      is accepted and waits for the runner                       queued
    STEERABLE   runs and takes steers and injected items                   running
    RUNNING     runs and takes no more steers: a compaction turn, or a     running
                turn whose runner decided to finish it
    CANCELLING  runs; its cancellation was requested (no more steers)      running
    ENDING      emitted its one terminal event (``run.completed`` or       running (queued when
                ``run.failed``); its outcome is not published yet          it never ran)
    COMPLETED   published its result (``Turn.result()`` returns it)        completed
    FAILED      published its error                                        failed
    CANCELLED   published its cancellation                                 cancelled

The transitions (``TRANSITIONS`` below says the same; any other raises
``TurnPhaseError``, a bug in trio_agent, never something a caller passed):

    QUEUED -> STEERABLE          start(): the runner picks a user or automatic turn
    QUEUED -> RUNNING            start(): the runner picks a compaction turn
    QUEUED -> ENDING             terminal_reported(): a queued turn is cancelled
    STEERABLE -> RUNNING         stop_steering(): the runner planned to finish the turn
    STEERABLE -> CANCELLING      cancel()
    STEERABLE -> ENDING          terminal_reported(): failed, or the agent was cancelled
    RUNNING -> CANCELLING        cancel()
    RUNNING -> ENDING            terminal_reported(): completed, failed, or the agent was cancelled
    CANCELLING -> ENDING         terminal_reported(): cancelled (or it ended before the cancellation landed)
    ENDING -> COMPLETED          finish()
    ENDING -> FAILED             finish()
    ENDING -> CANCELLED          finish()

Invariants -- which task writes what. ``TurnState`` changes only through its methods:
what a turn is given is ``Final`` (mypy refuses a later assignment), the lifecycle's
fields are private behind read-only properties, and nothing outside writes a slot
(the agent's observers hear of a steer from the turn queue). Each method is
synchronous, so a check and the change it guards happen in one step of Trio's
cooperative scheduling.

- The accepting task (``TurnQueue.accept``) creates the state, QUEUED, with the
  agent's input-activity counter and, for a turn that samples, the mailbox's
  ``MailFlag`` in its ``Preemption``.
- The runner's task alone starts the turn (``start``: ``ran`` and ``started`` are set
  there and nowhere else), runs it in a nursery whose scope becomes its ``cancel_scope``
  (``run_in``), takes the pending input at each
  request boundary (``next_steer``, ``take_injected``), stops steering when it plans to
  finish (synchronously with that decision, so a steer is either in before it or
  refused), and ends the turn: the terminal event (``TurnReporter`` calls
  ``terminal_reported``) and then ``finish`` in the same step, so no other task ever
  sees ENDING and no turn has two terminal events.
- A task cancelling a queued turn (``TurnControl.cancel``, or the runner's task in
  ``cancel_remaining``) goes through ``TurnQueue.cancel_queued``: QUEUED -> ENDING ->
  CANCELLED in one step.
- Any task may call ``cancel()``, the one place a running turn is cancelled:
  ``Turn.cancel``/``TurnControl.cancel``, ``interrupt_if_no_pending_input`` (from a
  tool of that very turn) and an approval hook's abort. It moves STEERABLE or RUNNING
  to CANCELLING and cancels the turn's scope, and returns False in any other phase, so
  every caller answers "not cancellable" from the same fact.
- Steering tasks (``Turn.steer``, ``submit``, ``inject``) add input (``add_steer``,
  ``add_items``) only while STEERABLE; they read ``steerable`` and add in one step.
- ``preemption`` (``Preemption``) is the turn's preempt signal: a steering task
  requests it, the exchanges and tools of the turn listen, the runner clears it when
  the steers join a request.

Not in the machine: whether the next request takes the pending input (the runner's
``_Live.drain``) is the runner's choice about what it sends, relevant only while
STEERABLE, read and written by the runner's task alone; it stays in the runner's
per-turn bookkeeping.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["TRANSITIONS", "TurnPhase", "TurnPhaseError", "TurnStatus", "advance", "ended_phase", "status_of"]


class TurnStatus(enum.Enum):
    # Members are singletons compared by identity: the identity hash is consistent with
    # that, and a C call where ``Enum.__hash__`` is Python (every phase change looks two up).
    __hash__ = object.__hash__

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TurnPhase(enum.Enum):
    __hash__ = object.__hash__  # as TurnStatus's

    QUEUED = "queued"
    STEERABLE = "steerable"
    RUNNING = "running"
    CANCELLING = "cancelling"
    ENDING = "ending"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


_P = TurnPhase

TRANSITIONS: Mapping[TurnPhase, frozenset[TurnPhase]] = {
    _P.QUEUED: frozenset({_P.STEERABLE, _P.RUNNING, _P.ENDING}),
    _P.STEERABLE: frozenset({_P.RUNNING, _P.CANCELLING, _P.ENDING}),
    _P.RUNNING: frozenset({_P.CANCELLING, _P.ENDING}),
    _P.CANCELLING: frozenset({_P.ENDING}),
    _P.ENDING: frozenset({_P.COMPLETED, _P.FAILED, _P.CANCELLED}),
    _P.COMPLETED: frozenset(),
    _P.FAILED: frozenset(),
    _P.CANCELLED: frozenset(),
}

_STATUS: Mapping[TurnPhase, TurnStatus] = {
    _P.QUEUED: TurnStatus.QUEUED,
    _P.STEERABLE: TurnStatus.RUNNING,
    _P.RUNNING: TurnStatus.RUNNING,
    _P.CANCELLING: TurnStatus.RUNNING,
    _P.COMPLETED: TurnStatus.COMPLETED,
    _P.FAILED: TurnStatus.FAILED,
    _P.CANCELLED: TurnStatus.CANCELLED,
}

_ENDED: Mapping[TurnStatus, TurnPhase] = {
    TurnStatus.COMPLETED: _P.COMPLETED,
    TurnStatus.FAILED: _P.FAILED,
    TurnStatus.CANCELLED: _P.CANCELLED,
}


class TurnPhaseError(RuntimeError):
    """A turn was moved, or given input, against its lifecycle (the module docstring):
    a bug in trio_agent, never caused by what a caller passed."""


def advance(turn_id: int, current: TurnPhase, target: TurnPhase) -> TurnPhase:
    """``target``, when ``current -> target`` is a transition; else ``TurnPhaseError``."""
    if target not in TRANSITIONS[current]:
        raise TurnPhaseError(
            f"internal error: turn {turn_id} cannot go from {current.name} to {target.name} "
            "(see trio_agent/_runtime/_turns/_phase.py)"
        )
    return target


def status_of(phase: TurnPhase, *, ran: bool) -> TurnStatus:
    """The public status of a turn in ``phase`` (``ran``: the runner started it)."""
    if phase is _P.ENDING:
        return TurnStatus.RUNNING if ran else TurnStatus.QUEUED
    return _STATUS[phase]


def ended_phase(turn_id: int, status: TurnStatus) -> TurnPhase:
    """The final phase of a turn that ends with ``status``."""
    phase = _ENDED.get(status)
    if phase is None:
        raise TurnPhaseError(f"internal error: turn {turn_id} cannot end as {status.name}")
    return phase
