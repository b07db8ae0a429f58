"""The tool call items of one response as it streams (pure; the accumulator's part).

A tool call item that finishes (``response.output_item.done``) is either

- *lost*: it came once a preempting steer wanted the response stopped (the interrupt
  is due, on the wire, or waits for the response id) -- it goes with the preempted
  response, as in codex (codex.md 3.5), silently (a mail cut is the accumulator's: it
  never reaches here);
- *discarded*: its ``call_id`` is not a non-empty string (no output could answer it), or
  it repeats the ``call_id`` of an earlier call of this response (history could not tell
  them apart) -- reported once (``CallDiscarded``), never run;
- or *announced* (``ToolCallReady``): the turn starts it now.

The response's completed output is the terminal frame's list when it has one, else the
items kept as they streamed. The list is reconciled with what streamed: each announced
call appears exactly once, as it was announced (it ran; one the list lacks is added at
its end, so that its output has its call), and no lost or discarded call appears; a
call only in the list (a server that streams no items) stays, and runs once the
response has ended. When a call was lost or discarded, or one that ran is missing from
the list, the response is unchained (``changed``): the server's copy may hold calls
history does not, or lack one it does, so the next request replays in full. A listed
call that differs from the announced one in other fields is taken as announced and
changes nothing: both copies hold the same calls, and chaining (the server's own copy)
stays right.
"""

from __future__ import annotations

from typing import Any

from .stream_events import TOOL_CALL_TYPES, CallDiscarded, StreamEvent, ToolCallReady, usable_call_id

__all__ = ["CallItems"]

Item = dict[str, Any]


class CallItems:
    """See the module docstring."""

    __slots__ = ("_announced", "_lost", "_reported", "changed")

    def __init__(self) -> None:
        self._announced: dict[str, Item] = {}  # call id -> the call announced
        self._lost: set[str] = set()  # call ids that came after the response was preempted
        self._reported: set[str] = set()  # the call ids (as shown) of the CallDiscarded said
        self.changed = False  # the response is unchained (see the module docstring)

    def finished(self, item: Item, *, preempted: bool) -> ToolCallReady | CallDiscarded | None:
        """A tool call item finished: announced, discarded, or lost (None)."""
        call_id = usable_call_id(item)
        if preempted:
            self.changed = True
            if call_id is not None:
                self._lost.add(call_id)
            return None
        discarded = _discarded(item, call_id, self._announced)
        if discarded is not None:
            self.changed = True
            self._reported.add(discarded.call_id)
            return discarded
        assert call_id is not None
        self._announced[call_id] = item
        return ToolCallReady(item)

    def final_output(self, listed: list[Item] | None, kept: list[Item], events: list[StreamEvent]) -> tuple[Item, ...]:
        """The completed output from the terminal frame's list (or, without one, the
        items ``kept``), reconciled; a discard not reported yet goes to ``events``."""
        if not listed:
            return tuple(kept)
        output: list[Item] = []
        seen: dict[str, Item] = {}
        for item in listed:
            if item.get("type") in TOOL_CALL_TYPES:
                call_id = usable_call_id(item)
                if call_id is not None and call_id in self._lost:
                    self.changed = True
                    continue
                discarded = _discarded(item, call_id, seen)
                if discarded is not None:
                    self.changed = True
                    if discarded.call_id not in self._reported:
                        self._reported.add(discarded.call_id)
                        events.append(discarded)
                    continue
                assert call_id is not None
                announced = self._announced.get(call_id)
                if announced is not None:
                    item = announced  # the call as it ran (the server's copy has the same call: still chained)
                seen[call_id] = item
            output.append(item)
        for call_id, call in self._announced.items():
            if call_id not in seen:  # it ran: it stays, answered by its output
                self.changed = True
                output.append(call)
        return tuple(output)


def _discarded(item: Item, call_id: str | None, kept: dict[str, Item]) -> CallDiscarded | None:
    """Why a tool call item cannot be kept beside the calls ``kept`` (None: it can)."""
    if call_id is None:
        return CallDiscarded(repr(item.get("call_id")), "its call_id is not a non-empty string")
    if call_id in kept:
        return CallDiscarded(call_id, "an earlier call of this response has the same call_id")
    return None
