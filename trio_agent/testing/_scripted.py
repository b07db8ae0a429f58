"""Running a scripted model beside a test, and recording what the agent emitted.

``scripted(script)`` is the pattern this project's own suite uses: the server side of
a test (``script``, an async function that drives a ``FakeResponsesServer``) runs in a
nursery beside the ``async with`` block, and the whole thing must finish within a
bound of Trio time (virtual under ``MockClock``)::

    async with scripted(model), ta.open_agent(config) as agent:
        await (await agent.prompt("hi")).result()

When the block ends, the script must finish too; one that is still waiting (for a
request the agent never sent, say) fails the test with ``ScriptUnfinished`` instead of
hanging it. An exception in the script (an assertion about a request) fails the test
with that exception.

``EventLog`` records an event stream for assertions: ``log.kinds()``,
``log.payloads(kind)``, ``await log.wait_for(kind, **fields)`` (or a predicate).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import trio

from .._event_payloads._shared import JsonValue
from .._events import AgentEvent, EventKind

__all__ = ["EventLog", "ScriptUnfinished", "record_events", "scripted"]


class ScriptUnfinished(AssertionError):
    """The scripted server side did not finish within its time bound."""


@asynccontextmanager
async def scripted(
    script: Callable[[], Awaitable[object]], seconds: float = 10.0
) -> AsyncIterator[trio.Nursery]:
    """Run ``script`` beside the block; both must end within ``seconds`` of Trio time.

    Yields the nursery both run in (start more server tasks in it if you like). Raises
    ``ScriptUnfinished`` when the time runs out: the message says whether the script,
    the block, or both were still running."""
    finished = False
    block_done = False

    async def run() -> None:
        nonlocal finished
        await script()
        finished = True

    with trio.move_on_after(seconds) as bound:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            yield nursery
            block_done = True
    if bound.cancelled_caught:
        name = getattr(script, "__qualname__", repr(script))
        if block_done:
            where = "the block finished, but the script was still waiting"
        elif finished:
            where = "the script finished, but the block was still running"
        else:
            where = "both the script and the block were still running"
        raise ScriptUnfinished(
            f"scripted({name}) did not finish within {seconds:g} s of Trio time: {where}. "
            "A script usually hangs on a request the agent never sent (next_request(), "
            "accept()); raise `seconds` if the script is just slow."
        )


class EventLog:
    """Every event a stream delivered so far, in order (filled by ``record_events``)."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []
        self.ended = False
        self._changed = trio.Event()

    def _add(self, event: AgentEvent) -> None:
        self.events.append(event)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def kinds(self) -> list[str]:
        """The dotted kinds, in order (``["run.started", ..., "run.completed"]``)."""
        return [event.kind.value for event in self.events]

    def of(self, kind: EventKind | str) -> list[AgentEvent]:
        """The events of one kind, in order."""
        wanted = EventKind(kind)
        return [event for event in self.events if event.kind is wanted]

    def payloads(self, kind: EventKind | str) -> list[dict[str, JsonValue]]:
        """The payloads of one kind, in order."""
        return [event.payload for event in self.of(kind)]

    async def consume(self, events: AsyncIterable[AgentEvent]) -> None:
        """Append every event of ``events`` until it ends; start it beside your test
        (``nursery.start_soon(log.consume, agent.events)``) to keep recording through
        the agent's close."""
        try:
            async for event in events:
                self._add(event)
        finally:
            self.ended = True
            self._wake()

    async def wait_for(
        self, what: EventKind | str | Callable[[AgentEvent], bool], /, **fields: object
    ) -> AgentEvent:
        """The first event (already recorded or still to come) that matches: of kind
        ``what`` whose payload has all ``fields``, or for which ``what(event)`` is true.
        Raises ``LookupError`` when the stream ends without one."""
        if callable(what):
            if fields:
                raise TypeError("wait_for(predicate) takes no payload fields; test them in the predicate")
            matches = what
        else:
            wanted = EventKind(what)

            def matches(event: AgentEvent) -> bool:
                return event.kind is wanted and all(event.payload.get(k) == v for k, v in fields.items())

        seen = 0
        while True:
            for event in self.events[seen:]:
                if matches(event):
                    return event
            seen = len(self.events)
            if self.ended:
                raise LookupError(f"the event stream ended without a matching event ({what!r}, {fields!r})")
            await self._changed.wait()


@asynccontextmanager
async def record_events(events: AsyncIterable[AgentEvent]) -> AsyncIterator[EventLog]:
    """Record ``events`` (e.g. ``agent.events``) into an ``EventLog`` from a task beside
    the block. Leaving the block stops recording unless the stream already ended (the
    agent closed inside the block); to record through the close, use
    ``nursery.start_soon(log.consume, agent.events)`` instead."""
    log = EventLog()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(log.consume, events)
        try:
            yield log
        finally:
            if not log.ended:
                nursery.cancel_scope.cancel()
