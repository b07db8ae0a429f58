"""The turn's lifecycle (``trio_agent._runtime._turns._phase``): every legal transition is
allowed, every other one raises ``TurnPhaseError``, the module's stated table is the one
enforced, and ``TurnState``'s methods walk the machine."""

from __future__ import annotations

import itertools
import re

import pytest
import trio

from trio_agent._runtime._turns import _phase as _turn_phase
from trio_agent._runtime._turns._pending_input import submit
from trio_agent._runtime._turns._phase import TRANSITIONS, TurnPhase, TurnPhaseError, advance, status_of
from trio_agent._runtime._turns._queue import TurnQueue
from trio_agent._runtime._turns._turn import Prompt, TurnState, TurnStatus
from trio_agent._wire.request import RequestSettings

P = TurnPhase
SETTINGS = RequestSettings("m", "low", False, False, "key", "session")
LEGAL = [(a, b) for a, b in itertools.product(P, P) if b in TRANSITIONS[a]]  # in a fixed order (xdist)
ILLEGAL = [(a, b) for a, b in itertools.product(P, P) if b not in TRANSITIONS[a]]


def test_the_table_covers_every_phase_and_ends_in_the_outcomes() -> None:
    assert set(TRANSITIONS) == set(P)
    assert {a for a, targets in TRANSITIONS.items() if not targets} == {P.COMPLETED, P.FAILED, P.CANCELLED}


def test_the_docstring_states_the_table_it_enforces() -> None:
    assert _turn_phase.__doc__ is not None
    stated = set(re.findall(r"^ {4}([A-Z]+) -> ([A-Z]+) ", _turn_phase.__doc__, re.MULTILINE))
    assert stated == {(a.name, b.name) for a, b in LEGAL}


@pytest.mark.parametrize(("current", "target"), LEGAL, ids=lambda p: p.name)
def test_every_legal_transition_is_allowed(current: TurnPhase, target: TurnPhase) -> None:
    assert advance(7, current, target) is target


@pytest.mark.parametrize(("current", "target"), ILLEGAL, ids=lambda p: p.name)
def test_every_other_transition_raises(current: TurnPhase, target: TurnPhase) -> None:
    with pytest.raises(TurnPhaseError, match=f"turn 7 cannot go from {current.name} to {target.name}"):
        advance(7, current, target)


@pytest.mark.parametrize(
    ("phase", "ran", "status"),
    [
        (P.QUEUED, False, TurnStatus.QUEUED),
        (P.STEERABLE, True, TurnStatus.RUNNING),
        (P.RUNNING, True, TurnStatus.RUNNING),
        (P.CANCELLING, True, TurnStatus.RUNNING),
        (P.ENDING, True, TurnStatus.RUNNING),
        (P.ENDING, False, TurnStatus.QUEUED),  # a queued turn being cancelled
        (P.COMPLETED, True, TurnStatus.COMPLETED),
        (P.FAILED, True, TurnStatus.FAILED),
        (P.CANCELLED, True, TurnStatus.CANCELLED),
        (P.CANCELLED, False, TurnStatus.CANCELLED),
    ],
)
def test_the_public_status_of_each_phase(phase: TurnPhase, ran: bool, status: TurnStatus) -> None:
    assert status_of(phase, ran=ran) is status


def _turn(*, compact: bool = False) -> TurnState:
    return TurnState(1, None if compact else Prompt("hi"), SETTINGS, compact=compact)


async def test_a_turn_that_completes() -> None:
    state = _turn()
    assert (state.phase, state.status, state.steerable, state.ran) == (P.QUEUED, TurnStatus.QUEUED, False, False)
    with pytest.raises(TurnPhaseError, match="took a steer while QUEUED"):
        state.add_steer("too early")
    state.start()
    assert (state.phase, state.status, state.steerable, state.ran) == (P.STEERABLE, TurnStatus.RUNNING, True, True)
    assert state.started.is_set() and not state.done.is_set()
    state.add_steer("one")
    state.add_items([{"type": "message"}])
    state.add_steer("two")
    assert (state.steer_count, state.pending_count, state.activity.count) == (2, 3, 3)
    assert state.take_injected() == [{"type": "message"}] and state.take_injected() == []
    assert [state.next_steer(), state.next_steer(), state.next_steer()] == ["one", "two", None]
    state.stop_steering()
    assert (state.phase, state.status, state.steerable) == (P.RUNNING, TurnStatus.RUNNING, False)
    with pytest.raises(TurnPhaseError, match="took injected items while RUNNING"):
        state.add_items([{"type": "message"}])
    with pytest.raises(TurnPhaseError, match="from RUNNING to COMPLETED"):
        state.finish(TurnStatus.COMPLETED)  # the terminal event comes first
    state.terminal_reported()
    with pytest.raises(TurnPhaseError, match="from ENDING to ENDING"):
        state.terminal_reported()  # exactly one terminal event
    state.finish(TurnStatus.COMPLETED)
    assert (state.phase, state.status) == (P.COMPLETED, TurnStatus.COMPLETED) and state.done.is_set()
    assert not state.cancel() and not state.cancel_scope.cancel_called


async def test_cancel_is_one_place_and_answers_once() -> None:
    state = _turn()
    assert not state.cancel()  # queued: the queue cancels it, not its scope
    state.start()
    assert state.cancel()
    assert state.phase is P.CANCELLING and state.cancel_scope.cancel_called and not state.steerable
    assert not state.cancel()  # already being cancelled
    state.terminal_reported()
    state.finish(TurnStatus.CANCELLED)
    assert state.status is TurnStatus.CANCELLED


async def test_a_compaction_turn_runs_unsteerable_and_can_be_cancelled() -> None:
    state = _turn(compact=True)
    state.start()
    assert (state.phase, state.status, state.steerable) == (P.RUNNING, TurnStatus.RUNNING, False)
    with pytest.raises(TurnPhaseError):
        state.stop_steering()
    assert state.cancel() and state.phase is P.CANCELLING


async def test_a_queued_turn_ends_without_running() -> None:
    state = _turn()
    state.terminal_reported()
    assert state.status is TurnStatus.QUEUED  # until its outcome is published
    state.finish(TurnStatus.CANCELLED)
    assert (state.status, state.ran, state.started.is_set()) == (TurnStatus.CANCELLED, False, True)
    with pytest.raises(TurnPhaseError):
        state.start()


async def test_a_turn_cannot_end_as_queued_or_running() -> None:
    state = _turn()
    state.terminal_reported()
    for status in (TurnStatus.QUEUED, TurnStatus.RUNNING):
        with pytest.raises(TurnPhaseError, match=f"cannot end as {status.name}"):
            state.finish(status)


# -- steering tasks add input only while the turn is steerable ------------------------------


class _Reporter:
    def cancelled_without_running(self, state: TurnState, error: object) -> None:
        pass


async def test_items_submitted_as_the_turn_finishes_start_a_turn_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``submit(items)`` finds a steerable turn, and the turn finishes during its
    checkpoint: the items start a turn (as a prompt does), they are not added to the
    finished one."""
    queue = TurnQueue(_Reporter())  # type: ignore[arg-type]
    live = queue.accept(Prompt("first"), SETTINGS)
    assert await queue.next() is live
    live.start()
    real = trio.lowlevel.checkpoint

    async def runner_finishes_meanwhile() -> None:
        monkeypatch.undo()
        live.stop_steering()
        live.terminal_reported()
        live.finish(TurnStatus.COMPLETED)
        queue.finished(live)
        await real()

    monkeypatch.setattr(trio.lowlevel, "checkpoint", runner_finishes_meanwhile)
    submission = await submit(queue, [{"type": "message"}], SETTINGS)
    assert submission.kind == "started" and submission.turn.turn_id == 2
    assert live.pending_count == 0
