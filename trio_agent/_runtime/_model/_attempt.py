"""One attempt's hold on the model: ``ModelClient.attempt_slot`` (the lock, and the
``Route`` chosen once: the live socket or HTTPS with this attempt's headers) and
``AttemptSlot.send``, which builds the body from history as it stands, runs the route's
exchange (``_exchange.py``) and returns the outcome; a route that recovers from a
failure (HTTPS with ChatGPT auth: a 401, once) gets one more exchange."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..._errors import ResponsesError
from ..._jsontext import dumps
from ..._wire.request import RequestSettings
from ..._wire.stream import ResponseOutcome
from . import _call_events as events
from ._response_feed import ResponseFeed

if TYPE_CHECKING:
    from ..._transport._quick_lock import QuickLock
    from ..._wire.stream import MailFlag
    from .._turns._turn import Preemption
    from ._bodies import RequestBodies
    from ._exchange import ResponseExchange, Route

__all__ = ["AttemptModel", "AttemptSlot", "Held", "SlotOwner"]


class AttemptModel(Protocol):
    """What an attempt uses of its ``ModelClient`` (named as a protocol, so that this
    module, which ``_model`` imports, does not import ``_model`` back)."""

    bodies: RequestBodies
    unfinished: ResponseExchange | None

    @property
    def generation(self) -> int: ...

    @property
    def emit(self) -> Callable[..., Any]: ...

    def defer(self, announce: Callable[[], object], /) -> None: ...

    def body(self, settings: RequestSettings, *, warmup: bool, websocket: bool) -> dict[str, Any]: ...

    def body_text(self, body: dict[str, Any], settings: RequestSettings, *, warmup: bool, websocket: bool) -> str: ...

    def feed(self, route: Route, phase: str, call_index: int | None, turn_id: int | None,
             mail: MailFlag | None = None, on_call: Callable[[dict[str, Any]], None] | None = None) -> ResponseFeed: ...

    def completed(self, outcome: ResponseOutcome, *, warmup: bool) -> None: ...


class SlotOwner(AttemptModel, Protocol):
    """What ``Held`` uses of its ``ModelClient``: the previous HTTPS response to finish,
    and the attempt's slot -- at once on the live socket, else after a wait."""

    async def settle(self) -> None: ...

    def enter_now(self) -> AttemptSlot | None: ...

    async def enter(self, turn_id: int | None) -> AttemptSlot: ...


class Held:
    """``ModelClient.attempt_slot``: the model's lock for one attempt (a plain class: it
    is entered on every request). The previous HTTPS response is finished first, when
    there is one; the slot on a live socket is made without a coroutine of its own
    (``enter_now``: the warm WebSocket path), any other after its wait (``enter``)."""

    __slots__ = ("_lock", "_model", "_turn_id")

    def __init__(self, lock: QuickLock, model: SlotOwner, turn_id: int | None) -> None:
        self._lock = lock
        self._model = model
        self._turn_id = turn_id

    async def __aenter__(self) -> AttemptSlot:
        # An uncontended lock is taken without a schedule point: the attempt goes on to its
        # send in the same step, and the events emitted so far reach the consumer after
        # the request is on the wire. The send (or ``enter``'s connect) is the checkpoint.
        lock = self._lock
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            model = self._model
            if model.unfinished is not None:
                await model.settle()  # the previous HTTPS response's connection is reused
            return model.enter_now() or await model.enter(self._turn_id)
        except BaseException:
            lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


class AttemptSlot:
    """One attempt's hold on the model (see ``ModelClient.attempt_slot``)."""

    def __init__(self, model: AttemptModel, route: Route) -> None:
        self._model = model
        self.route = route
        # The latest exchange's: the one that produced the outcome, or that failed (its
        # kept items: ``Sampler.with_retries``).
        self.feed: ResponseFeed | None = None

    @property
    def websocket(self) -> bool:
        """Whether this attempt goes over the WebSocket (else HTTPS)."""
        return self.route.websocket

    async def send(
        self,
        settings: RequestSettings,
        *,
        phase: str,
        call_index: int | None,
        attempt: int,
        max_attempts: int,
        turn_id: int | None,
        preemption: Preemption | None,
        warmup: bool = False,
        tail: Sequence[dict[str, Any]] = (),
        text_only: bool = False,
        on_call: Callable[[dict[str, Any]], None] | None = None,
    ) -> ResponseOutcome:
        """Build the body from history as it stands now, run the exchange, return the
        outcome (``ResponsesError`` on failure). No checkpoint comes before the
        exchange has registered its preemption signal. A compaction request's input
        ends with ``tail`` (the ``compaction_trigger``, or the summarization prompt);
        ``text_only`` sends ``tool_choice: "none"`` (a summarization request);
        ``on_call`` is handed each tool call as its item finishes streaming."""
        model, route = self._model, self.route
        websocket = route.websocket
        body = model.body(settings, warmup=warmup, websocket=websocket)
        model.bodies.last_body = body
        if tail:
            body["input"].extend(dict(item) for item in tail)
        if text_only:
            body["tool_choice"] = "none"
            text = dumps(body)  # not the layout RequestText learned: encoded in full
        else:
            text = model.body_text(body, settings, warmup=warmup, websocket=websocket)
        generation = model.generation
        model.defer(partial(  # (a partial, not a lambda: no code object of its own per request)
            events.attempt_started, model.emit, body, phase=phase, call_index=call_index, attempt=attempt,
            max_attempts=max_attempts, generation=generation, turn_id=turn_id,
        ))
        mail = preemption.mail if preemption is not None else None
        while True:
            exchange = route.exchange(model.feed(route, phase, call_index, turn_id, mail, on_call), preemption)
            self.feed = exchange.feed
            try:
                outcome = await exchange.run(body, text)
            except ResponsesError as exc:
                if await route.recovered(exc):
                    continue
                raise
            break
        if exchange.unfinished:
            model.unfinished = exchange
        route.ended(outcome)
        model.completed(outcome, warmup=warmup)
        return outcome
