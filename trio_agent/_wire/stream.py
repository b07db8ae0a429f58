"""The per-response state machine (pure).

Theory of operation: one ``ResponseAccumulator`` per attempt. ``feed(frame)`` takes
each parsed server frame and returns the *stream events* it implies (text deltas,
finished assistant messages, reasoning deltas, the sticky turn-state header, the
terminal outcome). The phase moves WAITING -> STREAMING on the first response frame
and to DONE or FAILED on a terminal frame; frames after that are a protocol error.
Text deltas carry the item id and phase recorded from ``response.output_item.added``
by ``output_index`` (nanocodex sec. 4.8). The completed output is
``response.output`` when non-empty, else the items collected from
``response.output_item.done``.

Interrupt-and-drain (SPEC sec. 4) is a phase of the same machine: ``want_interrupt()``
records that a preempting steer wants the live response stopped; ``interrupt_due``
says when the ``response.interrupt`` frame (``interrupt_frame()``) should go out --
as soon as the response id is known, exactly once -- and ``interrupt_sent()`` moves
the phase to DRAINING, where the machine keeps consuming frames until the terminal
one (``response.incomplete`` with reason ``interrupted`` is a completion with
``end_turn: false``). If the terminal frame never comes, ``abandoned_outcome()`` keeps
the items finished so far, unchained.

Mail cuts a response (SPEC sec. 10): when mail waits for the turn as a reasoning item or
a commentary message finishes, the response ends there (``cut()``). Whether mail waits
is a fact the accumulator is given as data, a ``MailFlag`` (``mail``): the agent's
mailbox keeps it current with one attribute write when mail is posted or taken, each
attempt of a turn that samples hands it over (with the turn's ``Preemption``), and the
accumulator reads it only when a cut-point item finishes -- no call into the runtime,
nothing added per frame.

Tool calls stream (codex.md 3.4): a tool call item that finishes and is kept yields
``ToolCallReady``, so the turn can start it while the rest of the response streams; one
that arrives after a mail cut or once a preempting steer wants the response stopped
(``interrupt_wanted``) is lost with the preempted response; the completed output is
reconciled with what streamed (``stream_calls``).

Response isolation: a frame that names another response -- one already finished on
this connection (a duplicated ``response.completed``), or any id other than the live
one -- is reported as a ``ForeignFrame`` and never taken as this response's answer.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from typing import Any

from .._errors import ProtocolError, ResponsesError
from .failures import failure_from_frame
from .frames import (
    ErrorFrame,
    Frame,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseIncomplete,
    ResponseMetadata,
)
from .stream_calls import CallItems
from .stream_events import (
    HISTORY_TYPES,
    TOOL_CALL_TYPES,
    AssistantMessageDone,
    CallDiscarded,
    ForeignFrame,
    ReasoningDelta,
    ResponseFinished,
    ResponseOutcome,
    ResponseStarted,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    TurnStateSeen,
    message_text,
)
from .usage import TokenUsage

# The stream events and the outcome live in ``stream_events``; they are named here too, so
# a reader of the accumulator imports what it says from the same module.
__all__ = [
    "HISTORY_TYPES",
    "TOOL_CALL_TYPES",
    "AssistantMessageDone",
    "CallDiscarded",
    "ForeignFrame",
    "MailFlag",
    "Phase",
    "ReasoningDelta",
    "ResponseAccumulator",
    "ResponseFinished",
    "ResponseOutcome",
    "ResponseStarted",
    "StreamEvent",
    "TextDelta",
    "ToolCallReady",
    "TurnStateSeen",
    "frame_response_id",
    "is_cut_point",
    "message_text",
]


class Phase(enum.Enum):
    WAITING = "waiting"
    STREAMING = "streaming"
    DRAINING = "draining"  # the interrupt is on the wire; waiting for the terminal frame
    DONE = "done"
    FAILED = "failed"


# Module globals: reading ``Phase.X`` is a descriptor call (Python 3.11), on the per-frame path.
_WAITING, _STREAMING, _DRAINING, _DONE, _FAILED = (
    Phase.WAITING, Phase.STREAMING, Phase.DRAINING, Phase.DONE, Phase.FAILED
)


class MailFlag:
    """Whether mail waits for the running turn: written by the agent's mailbox alone,
    read by the accumulator at a cut point (see the module docstring)."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = False


def frame_response_id(frame: Frame) -> str | None:
    """The response id a frame names, when it names one."""
    if isinstance(frame, ResponseCreated | ResponseCompleted):
        return frame.response.id
    if isinstance(frame, ResponseFailed | ResponseIncomplete | ErrorFrame):
        response = frame.raw.get("response")
        found = response.get("id") if isinstance(response, dict) else None
        return found if isinstance(found, str) and found else None
    return None


def _interrupted(raw: dict[str, Any]) -> bool:
    response = raw.get("response")
    details = response.get("incomplete_details") if isinstance(response, dict) else None
    return isinstance(details, dict) and details.get("reason") == "interrupted"


def is_cut_point(item: dict[str, Any]) -> bool:
    """A finished item after which waiting mail may cut the response: a reasoning item
    or an assistant commentary message -- never a final answer (codex.md 3.3)."""
    if item.get("type") == "reasoning":
        return True
    return item.get("type") == "message" and item.get("phase") == "commentary"


class ResponseAccumulator:
    """Consumes the frames of one response attempt; see the module docstring.

    ``stale`` names responses that already ended on this connection: a frame naming
    one of them, or naming any id other than this response's once that is known, is a
    ``ForeignFrame`` and changes nothing (response isolation).
    """

    def __init__(self, stale: Collection[str] = ()) -> None:
        self._stale = stale
        # Whether mail waits (the attempt hands it over; None: mail never cuts this response).
        self.mail: MailFlag | None = None
        self._cut = False
        self.phase = _WAITING
        self.response_id: str | None = None
        self.error: ResponsesError | None = None
        self._messages: dict[int, tuple[str | None, str | None]] = {}
        self._done_items: list[dict[str, Any]] = []
        self._calls = CallItems()
        self.interrupt_wanted = False

    # -- interrupt-and-drain -----------------------------------------------------------

    def want_interrupt(self) -> None:
        """A preempting steer wants this response stopped (idempotent)."""
        self.interrupt_wanted = True

    @property
    def interrupt_due(self) -> bool:
        """True when the ``response.interrupt`` frame should be sent now: wanted, the
        response id is known, and the response is still live and not yet interrupted."""
        return (
            self.interrupt_wanted
            and self.response_id is not None
            and self.phase in (_WAITING, _STREAMING)
        )

    def cut(self) -> None:
        """End this response here for the model's sake (mail waits, SPEC sec. 10): the
        items finished so far are kept, everything it sends after is discarded and
        never executed, and the live response is interrupted."""
        self._cut = True
        self.want_interrupt()

    @property
    def was_cut(self) -> bool:
        return self._cut

    def interrupt_frame(self) -> dict[str, Any]:
        return {"type": "response.interrupt", "response_id": self.response_id, "mode": "discard_partial_items"}

    def interrupt_sent(self) -> None:
        """The interrupt is on the wire: drain to the terminal frame."""
        if self.phase in (_WAITING, _STREAMING):
            self.phase = _DRAINING

    @property
    def kept(self) -> tuple[dict[str, Any], ...]:
        """The items finished and kept so far (what a failed attempt leaves: its calls
        may already have run)."""
        return tuple(self._done_items)

    @property
    def live(self) -> bool:
        return self.phase in (_WAITING, _STREAMING, _DRAINING)

    def feed(self, frame: Frame) -> list[StreamEvent]:
        """Advance on one frame; raises the frame's ``ResponsesError`` on a failure frame."""
        if self.phase in (_DONE, _FAILED):
            raise ProtocolError(f"frame {type(frame).__name__} after the response ended")
        named = frame_response_id(frame)
        if named is not None and (named in self._stale or named != (self.response_id or named)):
            return [ForeignFrame(type(frame).__name__, named, self.response_id)]
        handler = _HANDLERS.get(type(frame))
        if handler is None:
            return []  # unknown or ignored frames never fail a turn
        events: list[StreamEvent] = handler(self, frame)
        return events

    def feed_text_delta(self, delta: str, output_index: int, item_id: str | None) -> TextDelta | None:
        """``feed`` for a text delta frame, from its fields (``frames.text_delta_fields``):
        the same transition and the same ``TextDelta`` as ``feed(parse_frame(raw))``, or
        None when the response was cut. A delta names no response, so it is never foreign."""
        ids = self.text_delta_ids(output_index, item_id)
        return None if ids is None else TextDelta(delta, ids[0], ids[1])

    def text_delta_ids(self, output_index: int, item_id: str | None) -> tuple[str | None, str | None] | None:
        """``feed_text_delta`` without building the ``TextDelta`` (the per-delta path): its
        ``item_id`` and ``phase``, or None when the response was cut. A delta into a message
        announced with its id gets the recorded pair itself: nothing is allocated."""
        phase = self.phase
        if phase is not _STREAMING:
            if phase is _WAITING:
                self.phase = _STREAMING
            elif phase is not _DRAINING:
                raise ProtocolError("frame OutputTextDelta after the response ended")
        if self._cut:
            return None
        known = self._messages.get(output_index)
        if known is None:
            return (item_id, None)
        if known[0]:
            return known
        return (item_id, known[1])

    # -- transitions -------------------------------------------------------------------

    def _started(self, response_id: str | None) -> list[StreamEvent]:
        if self.phase is _WAITING:
            self.phase = _STREAMING
        if response_id and self.response_id is None:
            self.response_id = response_id
            return [ResponseStarted(response_id)]
        return []

    def _on_created(self, frame: ResponseCreated) -> list[StreamEvent]:
        return self._started(frame.response.id)

    def _on_item_added(self, frame: OutputItemAdded) -> list[StreamEvent]:
        item = frame.item
        if item.get("type") == "message":
            self._messages[frame.output_index] = (item.get("id"), item.get("phase"))
        return self._started(None)

    def _on_text_delta(self, frame: OutputTextDelta) -> list[StreamEvent]:
        delta = self.feed_text_delta(frame.delta, frame.output_index, frame.item_id)
        return [] if delta is None else [delta]

    def _on_reasoning(self, frame: ReasoningSummaryDelta) -> list[StreamEvent]:
        if self._cut:
            return self._started(None)
        return [*self._started(None), ReasoningDelta(frame.delta)]

    def _on_item_done(self, frame: OutputItemDone) -> list[StreamEvent]:
        events = self._started(None)
        if self._cut:
            return events  # after the cut: discarded, never executed
        item = frame.item
        kind = item.get("type")
        if kind in TOOL_CALL_TYPES:
            said = self._calls.finished(item, preempted=self.interrupt_wanted)
            if isinstance(said, ToolCallReady):
                self._done_items.append(item)
            if said is not None:
                events.append(said)
            return events
        self._done_items.append(item)
        if kind == "message" and item.get("role", "assistant") == "assistant":
            events.append(AssistantMessageDone(message_text(item), item.get("id"), item.get("phase")))
        if self.mail is not None and self.mail.waiting and is_cut_point(item):
            self.cut()
        return events

    def _on_completed(self, frame: ResponseCompleted) -> list[StreamEvent]:
        response = frame.response
        response_id = response.id or self.response_id
        if not response_id:
            self.phase = _FAILED
            raise ProtocolError("response.completed did not carry a response id")
        events = self._started(response_id)
        if self._cut:
            events.append(ResponseFinished(self._cut_outcome(response_id, response.usage)))
            return events
        output = self._calls.final_output(response.output, self._done_items, events)
        self.phase = _DONE
        outcome = ResponseOutcome(
            response_id=response_id,
            status=response.status or "completed",
            end_turn=response.end_turn,
            output=output,
            usage_raw=response.usage,
            usage=TokenUsage.from_api(response.usage),
            chained=not self._calls.changed,
        )
        events.append(ResponseFinished(outcome))
        return events

    def _on_failure(self, frame: ErrorFrame | ResponseFailed | ResponseIncomplete) -> list[StreamEvent]:
        if isinstance(frame, ResponseIncomplete) and _interrupted(frame.raw):
            return self._on_interrupted(frame.raw)
        self.phase = _FAILED
        self.error = failure_from_frame(frame.raw)
        raise self.error

    def _on_interrupted(self, raw: dict[str, Any]) -> list[StreamEvent]:
        """``response.incomplete`` with reason ``interrupted``: a completed response with
        ``end_turn: false`` that keeps its usage and the items finished before the
        interrupt (SPEC sec. 4)."""
        found = raw.get("response")
        response: dict[str, Any] = found if isinstance(found, dict) else {}
        response_id = response.get("id") if isinstance(response.get("id"), str) else self.response_id
        if not response_id:
            self.phase = _FAILED
            raise ProtocolError("an interrupted response.incomplete did not carry a response id")
        events = self._started(response_id)
        output = response.get("output")
        usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
        if self._cut:
            events.append(ResponseFinished(self._cut_outcome(response_id, usage)))
            return events
        listed = [item for item in output if isinstance(item, dict)] if isinstance(output, list) else None
        items = self._calls.final_output(listed, self._done_items, events)
        self.phase = _DONE
        outcome = ResponseOutcome(response_id, "incomplete", False, items, usage, TokenUsage.from_api(usage),
                                  chained=not self._calls.changed)
        events.append(ResponseFinished(outcome))
        return events

    def _cut_outcome(self, response_id: str, usage: dict[str, Any] | None) -> ResponseOutcome:
        """A cut response that reached its terminal frame: the kept items, unchained
        (the server's copy may hold what was discarded), the connection clean."""
        self.phase = _DONE
        return ResponseOutcome(
            response_id, "interrupted", False, tuple(self._done_items), usage, TokenUsage.from_api(usage), chained=False
        )

    def abandoned_outcome(self) -> ResponseOutcome:
        """What an interrupted response leaves when its terminal frame never came."""
        self.phase = _FAILED
        return ResponseOutcome(
            self.response_id or "", "interrupted", False, tuple(self._done_items), None, TokenUsage(), chained=False,
            clean_end=False,
        )

    def _on_metadata(self, frame: ResponseMetadata) -> list[StreamEvent]:
        for key, value in frame.headers.items():
            if str(key).lower() == "x-codex-turn-state" and isinstance(value, str):
                return [TurnStateSeen(value)]
        return []


_HANDLERS: dict[type, Any] = {
    ResponseCreated: ResponseAccumulator._on_created,
    OutputItemAdded: ResponseAccumulator._on_item_added,
    OutputTextDelta: ResponseAccumulator._on_text_delta,
    ReasoningSummaryDelta: ResponseAccumulator._on_reasoning,
    OutputItemDone: ResponseAccumulator._on_item_done,
    ResponseCompleted: ResponseAccumulator._on_completed,
    ErrorFrame: ResponseAccumulator._on_failure,
    ResponseFailed: ResponseAccumulator._on_failure,
    ResponseIncomplete: ResponseAccumulator._on_failure,
    ResponseMetadata: ResponseAccumulator._on_metadata,
}
