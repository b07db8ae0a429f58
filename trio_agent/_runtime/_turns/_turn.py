"""Turn handles (``Turn``, ``TurnControl``), results and the internal turn state.

A turn is QUEUED when accepted, RUNNING once the runner picks it, then exactly one
of COMPLETED, FAILED or CANCELLED. ``result()`` waits for that and returns the
``TurnResult`` or raises ``TurnFailed``/``TurnCancelled``. Those statuses are read
from the finer phases of ``TurnState``, whose transitions ``_phase`` states.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, final

import attrs
import trio

from ..._errors import (
    AgentError,
    InvalidPrompt,
    InvalidSessionSnapshot,
    SteerQueueFull,
    TurnNotCancellable,
    TurnNotSteerable,
)
from ..._session.conversation import ConversationSnapshot
from ..._wire.request import RequestSettings
from ..._wire.stream import MailFlag
from .._construction import NoPublicConstructor, construct
from ._input import InputActivity
from ._phase import TRANSITIONS, TurnPhase, TurnPhaseError, TurnStatus, advance, ended_phase, status_of

if TYPE_CHECKING:
    from ..._session.snapshot import SessionSnapshot
    from .._identity import SessionInfo

__all__ = ["STEER_CAPACITY", "Prompt", "Turn", "TurnControl", "TurnResult", "TurnState", "TurnStatus"]

STEER_CAPACITY = 8


def _image_list(images: object) -> tuple[str, ...]:
    if type(images) is tuple:  # the usual case (a text prompt's ``()``): no ABC check per prompt
        return images
    if isinstance(images, str | bytes):
        raise InvalidPrompt("images must be a list of image URLs, got a single string; pass images=[url]")
    if not isinstance(images, Iterable):
        raise InvalidPrompt(f"images must be a list of image URLs, got {type(images).__name__}")
    try:
        return tuple(images)
    except TypeError:
        raise InvalidPrompt(f"images must be a list of image URLs, got {type(images).__name__}") from None


@attrs.frozen
class Prompt:
    """A prompt: text and optional images.

    Images are ``data:`` URLs (or other non-HTTP URLs), sent as ``input_image`` items.
    Remote ``http(s)`` URLs are not fetched: each becomes a text placeholder saying so
    (as in the reference), so a prompt never makes the API download anything.
    """

    text: str
    images: tuple[str, ...] = attrs.field(default=(), converter=_image_list)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidPrompt(f"a prompt's text must be a string, got {type(self.text).__name__}")
        for url in self.images:
            if not isinstance(url, str) or not url:
                raise InvalidPrompt(f"prompt images must be non-empty URL strings, got {url!r}")

    def content(self) -> list[dict[str, str]]:
        parts = [{"type": "input_text", "text": self.text}]
        for url in self.images:
            if url.lower().startswith(("http://", "https://")):
                notice = f"[image omitted: remote image URLs are not supported: {url}]"
                parts.append({"type": "input_text", "text": notice})
            else:
                parts.append({"type": "input_image", "image_url": url})
        return parts


class Preemption:
    """The preempt signal of one turn (``steer(..., interrupt=True)``).

    While ``pending``, everything the turn is waiting on that can end early does: the
    live response is interrupted (``response.interrupt``), retry backoff is skipped,
    a running ``exec``/``wait`` returns ``Script running with cell ID N``. Code that can
    be preempted registers a *signal* for as long as it runs. A signal is synchronous
    and does no I/O: it only tells its owner to act, and returns an event that is set
    once the effect is done (the interrupt frame is on the wire, sent by the
    connection's side) or None when the effect is immediate. ``request()`` sets the
    flag, signals every registered owner and waits for those events, so ``steer``
    returns once the interrupt is on the wire; cancelling the steering caller changes
    nothing for the turn. The flag is cleared when the pending steers join a request.
    """

    def __init__(self, mail: MailFlag | None = None) -> None:
        self.pending = False
        self._signals: list[Callable[[], trio.Event | None]] = []
        # Whether mail waits, handed to each exchange of the turn: waiting mail cuts the
        # live response after a reasoning item or a commentary message (None: never).
        self.mail = mail

    @contextlib.contextmanager
    def hook(self, signal: Callable[[], trio.Event | None]) -> Iterator[None]:
        self.attach(signal)
        try:
            yield
        finally:
            self.detach(signal)

    def attach(self, signal: Callable[[], trio.Event | None]) -> None:
        """Register ``signal`` (``hook`` without a context manager: the exchange's hot path)."""
        self._signals.append(signal)

    def detach(self, signal: Callable[[], trio.Event | None]) -> None:
        self._signals.remove(signal)

    async def request(self) -> None:
        self.pending = True
        waits = [event for signal in list(self._signals) if (event := signal()) is not None]
        for event in waits:
            await event.wait()
        await trio.lowlevel.checkpoint()

    def clear(self) -> None:
        self.pending = False


@final
@attrs.frozen
class TurnResult:
    """The outcome of a completed turn. ``agent.fork_from(result)`` branches from it."""

    turn_id: int
    final_message: str
    response_id: str | None
    # The conversation exactly at this turn's end (O(1): history is persistent) and the
    # lineage (prompt cache key) it belongs to.
    _checkpoint: ConversationSnapshot | None = attrs.field(default=None, eq=False, repr=False, alias="checkpoint")
    _lineage: str | None = attrs.field(default=None, eq=False, repr=False, alias="lineage")
    _session: SessionInfo | None = attrs.field(default=None, eq=False, repr=False, alias="session")

    def snapshot(self) -> SessionSnapshot:
        """The session as of this turn's end, JSON-serialisable (``to_json()``); resume it
        with ``AgentConfig(resume=...)``."""
        if self._session is None or self._checkpoint is None:
            raise InvalidSessionSnapshot("this TurnResult was not produced by an agent; it has no session")
        return self._session.snapshot(self._checkpoint)


class TurnState:
    """A turn's state. Its own input is ``prompt`` (a user turn) or ``items`` (raw
    Responses items, or triggering mail: an *automatic* turn, whose first request also
    takes the input that was waiting, as codex's automatic idle work does); a
    ``compact`` turn has none. Compared by identity (one object per turn).

    Its lifecycle is the state machine of ``_phase`` (the phases, the transitions,
    and which task calls which method); it changes only through the methods below."""

    __slots__ = (  # noqa: RUF023  # field order
        "turn_id", "prompt", "settings", "activity", "items", "mail", "compact", "mail_mark", "preemption",
        "_scope", "started", "done", "_phase", "_ran", "_steers", "_injected", "_result", "_error",
    )

    def __init__(
        self, turn_id: int, prompt: Prompt | None, settings: RequestSettings, activity: InputActivity | None = None,
        items: tuple[dict[str, Any], ...] = (), mail: tuple[dict[str, Any], ...] = (), *, compact: bool = False,
        mail_flag: MailFlag | None = None, mail_mark: int = 0,
    ) -> None:
        # Given once (Final: mypy refuses any later assignment); the lifecycle is below.
        self.turn_id: Final = turn_id
        self.prompt: Final = prompt
        self.settings: Final = settings
        self.activity: Final = InputActivity() if activity is None else activity
        self.items: Final = items  # raw items: recorded exactly as given
        self.mail: Final = mail  # the mail that started an automatic turn
        self.compact: Final = compact  # a manual compaction turn (Agent.compact): no input, one compaction request
        # The mailbox's post count when it was accepted: mail waiting when it starts goes
        # before its own input if posted by then, after it if posted later (order of arrival).
        self.mail_mark: Final = mail_mark
        self.preemption: Final = Preemption(mail_flag)
        self._scope: trio.CancelScope | None = None  # see cancel_scope
        self.started: Final = trio.Event()  # set by start() or finish()
        self.done: Final = trio.Event()  # set by finish()
        self._phase = TurnPhase.QUEUED
        self._ran = False  # the runner started it (a queued turn cancelled in time never does)
        self._steers: collections.deque[str] = collections.deque()
        self._injected: list[dict[str, Any]] = []  # raw items from Agent.inject
        self._result: TurnResult | None = None
        self._error: AgentError | None = None

    @property
    def cancel_scope(self) -> trio.CancelScope:
        """The scope ``cancel()`` cancels: the one the runner runs the turn in (its
        nursery's, given by ``run_in``), or one of its own until then."""
        scope = self._scope
        if scope is None:
            scope = self._scope = trio.CancelScope()
        return scope

    def run_in(self, scope: trio.CancelScope) -> None:
        """The runner's task runs the turn in ``scope`` from now on (the turn's nursery:
        its calls run in it too); a cancel that came first carries over."""
        if self._scope is not None and self._scope.cancel_called:
            scope.cancel()
        self._scope = scope

    @property
    def automatic(self) -> bool:
        return self.prompt is None and not self.compact

    @property
    def phase(self) -> TurnPhase:
        return self._phase

    @property
    def status(self) -> TurnStatus:
        return status_of(self._phase, ran=self._ran)

    @property
    def steerable(self) -> bool:
        """It takes steers and injected items now."""
        return self._phase is TurnPhase.STEERABLE

    @property
    def ran(self) -> bool:
        return self._ran

    @property
    def result(self) -> TurnResult | None:
        return self._result

    @property
    def error(self) -> AgentError | None:
        return self._error

    @property
    def steer_count(self) -> int:
        """Steers waiting for the next request boundary."""
        return len(self._steers)

    @property
    def pending_count(self) -> int:
        """Steers and injected items waiting for the next request boundary."""
        return len(self._steers) + len(self._injected)

    # -- the lifecycle (_phase) -------------------------------------------------

    def _move(self, target: TurnPhase) -> None:
        if target not in TRANSITIONS[self._phase]:  # (checked here: no call per transition)
            advance(self.turn_id, self._phase, target)  # raises TurnPhaseError
        self._phase = target

    def start(self) -> None:
        """The runner picked it: it runs (and takes steers, unless it is a compaction)."""
        self._move(TurnPhase.RUNNING if self.compact else TurnPhase.STEERABLE)
        self._ran = True
        self.started.set()

    def stop_steering(self) -> None:
        """The runner decided to finish it: from now on a steer is refused."""
        self._move(TurnPhase.RUNNING)

    def cancel(self) -> bool:
        """Cancel the running turn: it takes no more steers and its scope is cancelled.
        False (nothing done) unless it runs and is not being cancelled already."""
        if self._phase is not TurnPhase.STEERABLE and self._phase is not TurnPhase.RUNNING:
            return False
        self._move(TurnPhase.CANCELLING)
        self.cancel_scope.cancel()
        return True

    def terminal_reported(self) -> None:
        """Its one terminal event (``run.completed`` or ``run.failed``) was emitted."""
        self._move(TurnPhase.ENDING)

    def finish(self, status: TurnStatus, *, result: TurnResult | None = None,
               error: AgentError | None = None) -> None:
        """Publish the outcome: ``result()`` returns or raises it from now on."""
        self._move(ended_phase(self.turn_id, status))
        self._result = result
        self._error = error
        self.started.set()  # nobody waits for a start that will never come
        self.done.set()

    # -- pending input -----------------------------------------------------------------

    def _require_steerable(self, what: str) -> None:
        if self._phase is not TurnPhase.STEERABLE:
            raise TurnPhaseError(f"internal error: turn {self.turn_id} took {what} while {self._phase.name}")

    def add_steer(self, text: str) -> None:
        """A steer joins at the next request boundary (only while steerable)."""
        self._require_steerable("a steer")
        self._steers.append(text)
        self.activity.notify("steer")

    def add_items(self, items: Iterable[dict[str, Any]]) -> None:
        """Raw items join at the next request boundary (only while steerable)."""
        self._require_steerable("injected items")
        self._injected.extend(items)
        self.activity.notify("steer")

    def next_steer(self) -> str | None:
        """The oldest waiting steer, taken (None when none waits)."""
        return self._steers.popleft() if self._steers else None

    def take_injected(self) -> list[dict[str, Any]]:
        """The waiting injected items, taken."""
        items, self._injected = self._injected, []
        return items


class QueuedTurns(Protocol):
    """What a turn handle needs from the turn queue: cancelling a turn that has not run,
    and telling it of a steer as submitted (for the agent's observers)."""

    def cancel_queued(self, state: TurnState) -> None: ...

    def steered(self, state: TurnState, text: str, interrupt: bool) -> None: ...

    def cancel_requested(self, state: TurnState) -> None: ...


@final
class TurnControl(metaclass=NoPublicConstructor):
    """A cancel-only handle to a turn (safe to hand to other tasks)."""

    _how_to_get: ClassVar[str] = "turn.control() returns one"

    def __init__(self, state: TurnState, queue: QueuedTurns) -> None:
        self._state = state
        self._queue = queue

    @classmethod
    def _create(cls, state: TurnState, queue: QueuedTurns) -> TurnControl:
        return construct(cls, state, queue)

    async def cancel(self) -> None:
        """Cancel the turn: a queued turn never runs; a live turn stops at once.

        Returns once the turn has ended (its terminal event is emitted). A queued turn
        leaves the queue at once and emits its terminal event before this returns.
        Raises ``TurnNotCancellable`` if it already finished or was cancelled.
        """
        state = self._state
        if state.phase is TurnPhase.QUEUED:
            self._queue.cancel_requested(state)
            self._queue.cancel_queued(state)
            await trio.lowlevel.checkpoint()
            return
        if not state.cancel():
            raise TurnNotCancellable(
                f"turn {state.turn_id} is {state.status.value} and cannot be cancelled"
            )
        self._queue.cancel_requested(state)
        await state.done.wait()


@final
class Turn(metaclass=NoPublicConstructor):
    """An accepted prompt. ``await turn.result()`` for its outcome."""

    _how_to_get: ClassVar[str] = (
        "await agent.prompt(...) returns one (so do submit(), start_if_idle(), compact() and post_mail())"
    )

    def __init__(self, state: TurnState, queue: QueuedTurns) -> None:
        self._state = state
        self._queue = queue

    @classmethod
    def _create(cls, state: TurnState, queue: QueuedTurns) -> Turn:
        return construct(cls, state, queue)

    @property
    def turn_id(self) -> int:
        return self._state.turn_id

    @property
    def status(self) -> TurnStatus:
        return self._state.status

    async def wait_running(self) -> bool:
        """Wait until the turn runs (True), or ended without running (False): after
        this returns True the turn accepts steers until it decides to finish."""
        await self._state.started.wait()
        return self._state.ran

    def control(self) -> TurnControl:
        return TurnControl._create(self._state, self._queue)

    async def cancel(self) -> None:
        """See ``TurnControl.cancel``."""
        await self.control().cancel()

    async def steer(self, text: str, *, interrupt: bool = False) -> None:
        """Add guidance that joins the live turn at its next model boundary.

        Steers are kept in a FIFO of 8 per turn (``SteerQueueFull`` beyond that) and
        sent, in order, as user messages with the next request -- after the live
        response and all of its tool calls finish, even if that response was a final
        answer. A steer is accepted only while the turn can still take it: once the
        turn has decided to finish, ``TurnNotSteerable`` is raised instead, so an
        accepted steer is never lost.

        With ``interrupt=True`` the steer preempts: a live WebSocket response is
        interrupted (``response.interrupt``, drained to its terminal frame, socket
        kept; tool calls already received still run), retry backoff is skipped, and a
        running ``exec``/``wait`` returns ``Script running with cell ID N`` while the
        cell keeps running. Other tools finish normally. Returns once the interrupt
        is on the wire: the connection's own side sends it (as soon as the live
        response's id is known, so a steer that lands before then waits for it), and
        cancelling this call does not stop it.
        """
        if not isinstance(text, str) or not text.strip():
            raise InvalidPrompt("a steer needs non-empty text")
        state = self._state
        await trio.lowlevel.checkpoint()
        if state.compact:
            raise TurnNotSteerable(f"turn {state.turn_id} is a compaction and takes no steers; prompt() or "
                                   "submit() queue a turn after it")
        if not state.steerable:
            raise TurnNotSteerable(
                f"turn {state.turn_id} is {state.status.value}; only a running turn can be steered"
            )
        if state.steer_count >= STEER_CAPACITY:
            raise SteerQueueFull(
                f"turn {state.turn_id} already has {STEER_CAPACITY} pending steers; "
                "wait for the next model boundary before steering again"
            )
        state.add_steer(text)
        self._queue.steered(state, text, interrupt)
        if interrupt:
            await state.preemption.request()

    async def result(self) -> TurnResult:
        """Wait for the turn; returns its ``TurnResult`` or raises ``TurnFailed``/``TurnCancelled``."""
        state = self._state
        await state.done.wait()
        if state._error is not None:  # (the slots, not their properties: this module's own class)
            raise state._error
        assert state._result is not None
        return state._result
