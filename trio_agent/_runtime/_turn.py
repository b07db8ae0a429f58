"""Turn handles (``Turn``, ``TurnControl``), results and the internal turn state.

A turn is QUEUED when accepted, RUNNING once the runner picks it, then exactly one
of COMPLETED, FAILED or CANCELLED. ``result()`` waits for that and returns the
``TurnResult`` or raises ``TurnFailed``/``TurnCancelled``.
"""

from __future__ import annotations

import collections
import contextlib
import enum
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, final

import attrs
import trio

from .._errors import (
    AgentError,
    InvalidPrompt,
    InvalidSessionSnapshot,
    SteerQueueFull,
    TurnNotCancellable,
    TurnNotSteerable,
)
from .._session.conversation import ConversationSnapshot
from .._wire.request import RequestSettings
from ._construction import NoPublicConstructor, construct
from ._input import InputActivity

if TYPE_CHECKING:
    from .._session.snapshot import SessionSnapshot
    from ._sessions import SessionInfo

__all__ = ["STEER_CAPACITY", "Prompt", "Turn", "TurnControl", "TurnResult", "TurnState", "TurnStatus"]

STEER_CAPACITY = 8


def _image_list(images: object) -> tuple[str, ...]:
    if isinstance(images, str | bytes):
        raise InvalidPrompt(
            "images must be a list of image URLs, got a single string; pass images=[url]"
        )
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

    def __init__(self) -> None:
        self.pending = False
        self._signals: list[Callable[[], trio.Event | None]] = []
        # Whether waiting mail may cut the live response after a reasoning item or a
        # commentary message (set by the runner; None: never).
        self.cut_check: Callable[[], bool] | None = None

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


class TurnStatus(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


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
    ``compact`` turn has none. Compared by identity (one object per turn)."""

    __slots__ = (  # noqa: RUF023  # field order
        "turn_id", "prompt", "settings", "activity", "items", "mail", "status", "steerable", "steers", "injected",
        "preemption", "cancel_scope", "started", "done", "result", "error", "terminal_emitted", "ran",
        "compact",
    )

    def __init__(
        self, turn_id: int, prompt: Prompt | None, settings: RequestSettings, activity: InputActivity | None = None,
        items: tuple[dict[str, Any], ...] = (), mail: tuple[dict[str, Any], ...] = (), *, compact: bool = False,
    ) -> None:
        self.turn_id = turn_id
        self.prompt = prompt
        self.settings = settings
        self.activity = InputActivity() if activity is None else activity
        self.items = items  # raw items: recorded exactly as given
        self.mail = mail  # the mail that started an automatic turn
        self.status = TurnStatus.QUEUED
        self.steerable = False
        self.steers: collections.deque[str] = collections.deque()
        self.injected: list[dict[str, Any]] = []  # raw items from Agent.inject
        self.preemption = Preemption()
        self.cancel_scope = trio.CancelScope()
        self.started = trio.Event()
        self.done = trio.Event()
        self.result: TurnResult | None = None
        self.error: AgentError | None = None
        self.terminal_emitted = False  # exactly one run.completed / run.failed per turn
        self.ran = False  # the runner started it (a queued turn cancelled in time never does)
        self.compact = compact  # a manual compaction turn (Agent.compact): no input, one compaction request

    @property
    def automatic(self) -> bool:
        return self.prompt is None and not self.compact

    def finish(self, status: TurnStatus, *, result: TurnResult | None = None,
               error: AgentError | None = None) -> None:
        self.status = status
        self.steerable = False
        self.result = result
        self.error = error
        self.started.set()  # nobody waits for a start that will never come
        self.done.set()


class QueuedTurns(Protocol):
    """What a turn handle needs from the turn queue: cancelling a turn that has not run,
    and telling it of a steer as submitted (for the agent's observers)."""

    def cancel_queued(self, state: TurnState) -> None: ...

    def steered(self, state: TurnState, text: str, interrupt: bool) -> None: ...


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
        if state.status is TurnStatus.QUEUED:
            self._queue.cancel_queued(state)
            await trio.lowlevel.checkpoint()
            return
        if state.status is not TurnStatus.RUNNING or state.cancel_scope.cancel_called:
            raise TurnNotCancellable(
                f"turn {state.turn_id} is {state.status.value} and cannot be cancelled"
            )
        state.steerable = False
        state.cancel_scope.cancel()
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
        if state.status is not TurnStatus.RUNNING or not state.steerable:
            raise TurnNotSteerable(
                f"turn {state.turn_id} is {state.status.value}; only a running turn can be steered"
            )
        if len(state.steers) >= STEER_CAPACITY:
            raise SteerQueueFull(
                f"turn {state.turn_id} already has {STEER_CAPACITY} pending steers; "
                "wait for the next model boundary before steering again"
            )
        state.steers.append(text)
        state.activity.notify("steer")
        self._queue.steered(state, text, interrupt)
        if interrupt:
            await state.preemption.request()

    async def result(self) -> TurnResult:
        """Wait for the turn; returns its ``TurnResult`` or raises ``TurnFailed``/``TurnCancelled``."""
        await self._state.done.wait()
        if self._state.error is not None:
            raise self._state.error
        assert self._state.result is not None
        return self._state.result
