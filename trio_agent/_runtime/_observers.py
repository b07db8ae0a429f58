"""The observer seam: how add-ons (tracing, recording, ...) attach to an agent.

Theory of operation. An add-on sees an agent through three things, all installed once,
where the agent's parts are wired (``AgentParts``):

- its events: every ``AgentEvent`` it emits, synchronously, in the emitting task
  (``ObservedSink``). An agent no observer watches keeps the plain ``EventSink``: the
  per-event (and per-frame: ``api.event``) path is then exactly the unobserved one;
- each turn's input and end, which the events only summarise (``run.started`` carries
  the prompt's size, ``run.steered`` neither the text nor ``interrupt``): a turn
  accepted, with its prompt, in the accepting task (``TurnQueue.accept``); a steer as
  submitted (``Turn.steer``); a turn's end with its status and final message
  (``TurnReporter``);
- one connection tap (``_transport/tap.py``): every WebSocket and HTTPS request the
  model client opens, the frames and bytes on it and how it closed.

The runtime never imports an add-on. The package face registers them (``install``,
from ``_wiring.py``): when a root agent's block opens (``run_agent``), each ``AddOn``
reads the config and returns an ``Attachment`` for the agent tree, or None when the
config does not ask for it (``AgentConfig.tracing``, ``.record``). The attachment makes
one ``AgentObserver`` per agent of the tree -- the root, its forks, children and
workers, which inherit the root's attachments through their ``Origin`` -- and is closed
when the root's block ends, after every agent of the tree. An agent's observers are
closed when its event stream ends.

An observer never changes what the agent does: one whose method raises is dropped
with a ``RuntimeWarning`` (the agent goes on, unobserved by it). Taps are exempt: they
are called on the frame path, unguarded, and must not raise.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import trio

from .._events import AgentEvent, EventKind, EventSink
from .._record import Record
from .._transport.tap import tap_all

if TYPE_CHECKING:
    from .._config import AgentConfig
    from .._transport.tap import ConnectionTap
    from ._secrets import Redactor
    from ._turns._turn import Prompt

__all__ = ["AddOn", "AgentObserver", "AgentSite", "Attachment", "ObservedSink", "Observers", "install",
           "open_attachments"]


class AgentSite(Record):
    """What an attachment is told of an agent it observes: its config, mail ``path``,
    its parent's session id, how it came to be (``origin``: ``root``, ``fork``,
    ``spawn`` or ``resume``) and its ``secrets`` (every credential it sends, which an
    observer keeps out of what it writes)."""

    __slots__ = ("config", "path", "parent_id", "origin", "secrets")  # noqa: RUF023  # field order

    def __init__(self, config: AgentConfig, path: str, parent_id: str | None, origin: str,
                 secrets: Redactor) -> None:
        self.config = config
        self.path = path
        self.parent_id = parent_id
        self.origin = origin
        self.secrets = secrets


class AgentObserver:
    """One add-on's view of one agent: override what it needs (every method is a no-op).

    ``events``: it wants ``on_event`` (else the agent's sink is not wrapped for it);
    ``immediate``: it must see each event in the emitting task at its emission (no
    ``EventSink.defer``: the events announcing a request are then emitted before it is
    sent, not after); ``api_events``: it reads ``api.event`` even when the application
    turned them off (they reach it, never ``agent.events``); ``kinds``: the only kinds
    ``on_event`` is given (None: every kind; the text deltas are most of a turn's
    events); ``api_frames``: the only ``api.event`` frames it is given, by the frame's
    ``type`` (None: every frame; the streamed deltas are most of a turn's frames);
    ``tap``: its connection tap, if any; ``background``: it has work to run later, in
    ``run`` (a task of the agent's nursery, from startup until the agent shuts down),
    and ``flush`` runs that work now (``Agent.flush_telemetry``, and before it is
    dropped)."""

    name: ClassVar[str] = "an observer"  # in the warning when it fails
    events: ClassVar[bool] = False
    immediate: ClassVar[bool] = False
    api_events: ClassVar[bool] = False
    kinds: frozenset[EventKind] | None = None
    api_frames: frozenset[str] | None = None
    tap: ConnectionTap | None = None
    background: ClassVar[bool] = False

    def on_event(self, event: AgentEvent) -> None:
        """An event, as emitted (in the emitting task)."""

    def accepted(self, turn_id: int, prompt: Prompt | None) -> None:
        """A turn was accepted, in the accepting task (``prompt`` None: an automatic
        turn, from raw items or mail, or a compaction)."""

    def steered(self, turn_id: int, text: str, interrupt: bool) -> None:
        """A steer was submitted to running turn ``turn_id``."""

    def cancel_requested(self, turn_id: int) -> None:
        """The application cancelled turn ``turn_id`` (``Turn.cancel``), as the cancel
        takes effect: before the turn ends."""

    def compact_requested(self, turn_id: int) -> None:
        """The application asked for a compaction (``Agent.compact``): turn ``turn_id``,
        just accepted."""

    def injected(self, items: list[dict[str, Any]], joined: bool) -> None:
        """The application injected raw ``items`` (``Agent.inject``): they ``joined`` the
        running turn, or wait for the next."""

    def mailed(self, author: str, text: str, trigger_turn: bool, turn_id: int | None) -> None:
        """The application posted mail (``Agent.post_mail``; not mail between the agents
        of the tree); ``turn_id``: the automatic turn it started, if any."""

    def ended(self, turn_id: int, status: str, final_message: str | None) -> None:
        """Turn ``turn_id`` ended (right after its terminal event)."""

    def close(self) -> None:
        """The agent's event stream ended: the agent is closed."""

    async def run(self) -> None:
        """Its deferred work, in the agent's nursery (``background`` observers only);
        cancelled when the agent shuts down."""

    def flush(self) -> None:
        """Run its deferred work now."""


class Attachment(Protocol):
    """One add-on attached to one agent tree (see the module docstring)."""

    def observe(self, site: AgentSite) -> AgentObserver | None:
        """The observer of one agent of the tree (None: this one is not observed)."""

    def close(self) -> None:
        """The tree's root closed, after every agent of the tree."""


class AddOn(Protocol):
    """An add-on the package face installed: what a root agent's config attaches."""

    def open(self, config: AgentConfig) -> Attachment | None:
        """The attachment for a tree whose root has ``config`` (None: not asked for).
        May raise ``ConfigError`` (then the agent does not open)."""


_ADDONS: list[AddOn] = []


def install(addon: AddOn) -> None:
    """Register an add-on for every agent opened from now on (the package face's)."""
    _ADDONS.append(addon)


def open_attachments(config: AgentConfig) -> tuple[Attachment, ...]:
    """The attachments of a new agent tree (what its root's config asks for)."""
    opened: list[Attachment] = []
    try:
        for addon in _ADDONS:
            attachment = addon.open(config)
            if attachment is not None:
                opened.append(attachment)
    except BaseException:
        close_attachments(opened)
        raise
    return tuple(opened)


def close_attachments(attachments: Sequence[Attachment]) -> None:
    for attachment in attachments:
        attachment.close()


class Observers:
    """The observers of one agent and what they ask of it (see the module docstring)."""

    def __init__(self, attachments: Sequence[Attachment], site: AgentSite) -> None:
        self._session_id = site.config.session_id
        self._shown_api_events = site.config.api_events  # whether api.event reaches agent.events
        observers = [observer for a in attachments if (observer := a.observe(site)) is not None]
        self._all = observers
        self._watching = [observer for observer in observers if observer.events]
        self.api_events = any(observer.api_events for observer in observers)
        self.tap: ConnectionTap | None = tap_all([o.tap for o in observers if o.tap is not None])

        self._background: list[trio.CancelScope] = []

    def __len__(self) -> int:
        return len(self._all)

    def start(self, nursery: trio.Nursery) -> None:
        """Start the background observers' ``run`` in the agent's nursery (until ``stop``)."""
        for observer in self._all:
            if observer.background:
                scope = trio.CancelScope()
                self._background.append(scope)
                nursery.start_soon(self._run, observer, scope)

    async def _run(self, observer: AgentObserver, scope: trio.CancelScope) -> None:
        with scope:
            try:
                await observer.run()
            except Exception as exc:
                self.failed(observer, exc)

    def stop(self) -> None:
        """The agent shuts down: the background tasks end (what they left is flushed on ``close``)."""
        for scope in self._background:
            scope.cancel()

    def flush(self) -> None:
        for observer in tuple(self._all):
            self._call(observer, observer.flush)

    def sink(self) -> EventSink:
        """The agent's event sink: the plain ``EventSink`` unless an observer watches events."""
        if not self._watching:
            return EventSink(self._session_id) if not self._all else _ClosingSink(self._session_id, self)
        return ObservedSink(self._session_id, self, self._watching, api_events=self._shown_api_events,
                            immediate=any(observer.immediate for observer in self._watching))

    def accepted(self, turn_id: int, prompt: Prompt | None) -> None:
        for observer in tuple(self._all):
            self._call(observer, observer.accepted, turn_id, prompt)

    def steered(self, turn_id: int, text: str, interrupt: bool) -> None:
        for observer in tuple(self._all):
            self._call(observer, observer.steered, turn_id, text, interrupt)

    def cancel_requested(self, turn_id: int) -> None:
        for observer in tuple(self._all):
            self._call(observer, observer.cancel_requested, turn_id)

    def compact_requested(self, turn_id: int) -> None:
        for observer in tuple(self._all):
            self._call(observer, observer.compact_requested, turn_id)

    def injected(self, items: list[dict[str, Any]], joined: bool) -> None:
        for observer in tuple(self._all):
            self._call(observer, observer.injected, items, joined)

    def mailed(self, author: str, text: str, trigger_turn: bool, turn_id: int | None) -> None:
        for observer in tuple(self._all):
            self._call(observer, observer.mailed, author, text, trigger_turn, turn_id)

    def ended(self, turn_id: int, status: str, final_message: str | None) -> None:
        for observer in tuple(self._all):
            self._call(observer, observer.ended, turn_id, status, final_message)

    def close(self) -> None:
        observers, self._all = self._all, []
        self._watching.clear()
        for observer in observers:
            self._call(observer, observer.close)

    def _call(self, observer: AgentObserver, method: Callable[..., None], *args: Any) -> None:
        try:
            method(*args)
        except Exception as exc:
            self.failed(observer, exc)

    def failed(self, observer: AgentObserver, exc: Exception) -> None:
        """Drop ``observer`` after it raised ``exc`` (a ``RuntimeWarning`` says so); what it
        deferred runs first (each piece once: ``flush`` takes it off its queue)."""
        if observer in self._all:
            self._all.remove(observer)
            if observer.background:
                try:
                    observer.flush()
                except Exception:  # the warning below reports the first error
                    pass
        if observer in self._watching:
            self._watching.remove(observer)
        warnings.warn(
            f"trio_agent: {observer.name} stopped for agent session {self._session_id} after an internal error: "
            f"{exc!r}", RuntimeWarning, stacklevel=4,
        )


class _ClosingSink(EventSink):
    """The plain sink of an agent whose observers watch no events: closing it closes them."""

    def __init__(self, session_id: str, observers: Observers) -> None:
        super().__init__(session_id)
        self._observers = observers

    def close(self) -> None:
        super().close()
        self._observers.close()


_API_EVENT = EventKind.API_EVENT


def _kinds_wanted(observers: Sequence[AgentObserver]) -> frozenset[EventKind] | None:
    """The kinds any of ``observers`` takes (None: every kind)."""
    wanted: set[EventKind] = set()
    for observer in observers:
        if observer.kinds is None:
            return None
        wanted |= observer.kinds
    return frozenset(wanted)


def _frames_wanted(observers: Sequence[AgentObserver]) -> frozenset[str] | None:
    """The ``api.event`` frame types any of ``observers`` takes (None: every frame)."""
    wanted: set[str] = set()
    for observer in observers:
        if observer.kinds is not None and _API_EVENT not in observer.kinds:
            continue
        if observer.api_frames is None:
            return None
        wanted |= observer.api_frames
    return frozenset(wanted)


def _frame_type(payload: dict[str, Any]) -> str | None:
    """The ``type`` of an ``api.event``'s frame: server data, so anything (a list would
    not even hash); None unless a string."""
    frame = payload.get("event")
    frame_type = frame.get("type") if isinstance(frame, dict) else None
    return frame_type if isinstance(frame_type, str) else None


def _takes(observer: AgentObserver, kind: EventKind, frame_type: str | None) -> bool:
    """Whether ``observer`` is given an event of ``kind`` (and, for ``api.event``, of
    that frame type)."""
    if observer.kinds is not None and kind not in observer.kinds:
        return False
    return kind is not _API_EVENT or observer.api_frames is None or frame_type in observer.api_frames


class ObservedSink(_ClosingSink):
    """An ``EventSink`` whose every event is also shown to the watching observers,
    synchronously in the emitting task (so they see the emitter's context)."""

    def __init__(self, session_id: str, observers: Observers, watching: list[AgentObserver], *, api_events: bool,
                 immediate: bool) -> None:
        super().__init__(session_id, observers)
        self._watching = watching  # shared with ``observers``: a failed observer leaves both
        # AgentConfig(api_events=False) with an observer that reads them: the model client
        # still reports frames, but they never reach agent.events nor take a seq.
        self._api_events = api_events
        self._immediate = immediate
        # The kinds (and frame types) any watching observer takes (None: all); the others
        # skip the loop.
        self._wanted = _kinds_wanted(watching)
        self._frames = _frames_wanted(watching)

    def emit(self, kind: EventKind, payload: dict[str, Any], turn_id: int | None = None) -> AgentEvent:
        # Per event (~50 a warm turn, half of them streamed frames): the filters inline.
        frame_type: str | None = None
        if kind is _API_EVENT:
            if self._api_events:
                event = EventSink.emit(self, kind, payload, turn_id)
            else:
                if self._deferred:
                    self.flush()
                event = AgentEvent(kind, payload, 0, self.session_id, turn_id, trio.current_time())
            # ``_frame_type``, inline. ``self._frames`` is empty when no observer takes
            # ``api.event`` at all (``_frames_wanted``): the kind filter is in it.
            frame = payload.get("event")
            found = frame.get("type") if isinstance(frame, dict) else None
            frame_type = found if isinstance(found, str) else None
            if self._frames is not None and frame_type not in self._frames:
                return event
        else:
            event = EventSink.emit(self, kind, payload, turn_id)
            if self._wanted is not None and kind not in self._wanted:
                return event
        for observer in self._watching:
            kinds = observer.kinds
            if kinds is not None and kind not in kinds:
                continue
            if kind is _API_EVENT and observer.api_frames is not None and frame_type not in observer.api_frames:
                continue
            try:
                observer.on_event(event)
            except Exception as exc:
                self._failed_at(event, observer, exc)
                break
        return event

    def _failed_at(self, event: AgentEvent, observer: AgentObserver, exc: Exception) -> None:
        """``observer`` raised on ``event``: drop it, and show the event to the observers
        after it (the fast loop stops: its list changes)."""
        rest = self._watching[self._watching.index(observer) + 1:]
        self._observers.failed(observer, exc)
        frame_type = _frame_type(event.payload) if event.kind is _API_EVENT else None
        for other in rest:
            if not _takes(other, event.kind, frame_type):
                continue
            try:
                other.on_event(event)
            except Exception as error:
                self._observers.failed(other, error)

    def defer(self, emit_later: Callable[[], object]) -> None:
        if self._immediate:
            emit_later()  # an observer opens spans in the emitting task's context, at its time
        else:
            super().defer(emit_later)
