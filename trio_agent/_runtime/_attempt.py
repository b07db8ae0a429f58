"""One attempt's hold on the model: ``ModelClient.attempt_slot`` (the lock, the socket or
the HTTPS headers) and ``AttemptSlot.send``, which builds the body from history as it
stands, runs the WebSocket or HTTPS exchange and returns the outcome; over HTTPS with
ChatGPT auth a 401 asks the auth source to recover once and sends again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio

from .._config import Transport
from .._errors import ResponsesError
from .._jsontext import dumps
from .._transport.auth import https_headers, recover_unauthorized
from .._wire.request import RequestSettings
from .._wire.stream import MailFlag, ResponseOutcome
from . import _model_events as events
from ._exchange import Exchange
from ._recorder import ExchangeRecorder

if TYPE_CHECKING:
    from .._transport.websocket import WebSocketLink
    from ._model import ModelClient
    from ._turn import Preemption

__all__ = ["AttemptSlot", "Held"]


class Held:
    """``ModelClient.attempt_slot``: the model's lock for one attempt (a plain class: it
    is entered on every request)."""

    __slots__ = ("_model", "_turn_id")

    def __init__(self, model: ModelClient, turn_id: int | None) -> None:
        self._model = model
        self._turn_id = turn_id

    async def __aenter__(self) -> AttemptSlot:
        # An uncontended lock is taken without a schedule point: the attempt goes on to its
        # send in the same step, and the events emitted so far reach the consumer after
        # the request is on the wire. The send (or ``_enter``'s connect) is the checkpoint.
        lock = self._model._lock
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self._model.settle()  # the previous HTTPS response's connection is reused
            return await self._model._enter(self._turn_id)
        except BaseException:
            lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._model._lock.release()


class AttemptSlot:
    """One attempt's hold on the model (see ``ModelClient.attempt_slot``)."""

    def __init__(self, model: ModelClient, link: WebSocketLink | None, headers: list[tuple[str, str]],
                 snapshot: Any) -> None:
        self._model = model
        self._link = link
        self._headers = headers
        self._snapshot = snapshot
        self.recorder: ExchangeRecorder | None = None  # the exchange that produced the outcome

    @property
    def https(self) -> bool:
        """Whether this attempt goes over HTTPS."""
        return self._link is None

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
    ) -> ResponseOutcome:
        """Build the body from history as it stands now, run the exchange, return the
        outcome (``ResponsesError`` on failure). No checkpoint comes before the
        exchange has registered its preemption signal. A compaction request's input
        ends with ``tail`` (the ``compaction_trigger``, or the summarization prompt);
        ``text_only`` sends ``tool_choice: "none"`` (a summarization request)."""
        model = self._model
        websocket = self._link is not None
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
        model.defer(lambda: events.attempt_started(
            model.emit, body, phase=phase, call_index=call_index, attempt=attempt, max_attempts=max_attempts,
            generation=generation, turn_id=turn_id,
        ))
        mail = preemption.mail if preemption is not None else None
        if self._link is not None:
            recorder = model.recorder(Transport.WEBSOCKET, phase, call_index, turn_id, mail)
            exchange = Exchange(self._link, recorder, idle_timeout=model.idle_timeout, preemption=preemption)
            outcome = await exchange.run(body, text)
        else:
            recorder, outcome = await self._https(body, text, phase, call_index, turn_id, preemption, mail)
        model.completed(outcome, warmup=warmup)
        self.recorder = recorder
        return outcome

    async def _https(
        self, body: dict[str, Any], text: str, phase: str, call_index: int | None, turn_id: int | None,
        preemption: Preemption | None, mail: MailFlag | None,
    ) -> tuple[ExchangeRecorder, ResponseOutcome]:
        from ._https_exchange import HttpsExchange

        model = self._model
        config = model.config
        transport = model.https()
        recovered = False
        while True:
            recorder = model.recorder(Transport.HTTPS, phase, call_index, turn_id, mail)
            exchange = HttpsExchange(transport, recorder, preemption=preemption)
            try:
                outcome = await exchange.run(body, self._headers, text)
                if exchange.unfinished:
                    model._unfinished = exchange
                return recorder, outcome
            except ResponsesError as exc:
                # ChatGPT auth: a 401 asks the source to recover once, then retries.
                if exc.status != 401 or self._snapshot is None or recovered:
                    raise
                recovered = True
                await recover_unauthorized(config, self._snapshot)
                self._headers, self._snapshot = await https_headers(config)
                model.redactor.add(self._snapshot.token if self._snapshot is not None else None)
