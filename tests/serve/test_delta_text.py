"""A text delta's notification is assembled from pre-encoded parts (issue 30, item 3):
its params up to the delta, encoded once per item, then the delta alone -- not the
whole message encoded per delta. The text on the wire is exactly what encoding the
message gives, for any delta and item id (quotes, escapes, the line breaks JSON leaves
raw, lone surrogates, astral characters).

Checked without the change: there was no ``params_text`` (the assembled text could
not be built); the equality with ``encode`` is what keeps the wire unchanged.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from trio_agent import AgentEvent, EventKind
from trio_agent._serve._items import ThreadMapper, UserInput
from trio_agent._serve._jsonrpc import encode, notification_message, notification_text

DELTAS = ["Hel", "", 'a "quoted" \\ back\\slash', "line\nbreak\r\ttab", "\u2028\u2029\u0085 separators",
          "\ud800 lone", "emoji 🚀 é ☃", "\x00\x1f controls", "</script>"]


def _mapper() -> ThreadMapper:
    ids = itertools.count(1)
    clock = itertools.count(1000, 10)
    return ThreadMapper('thread-"1"', cwd="/work", model_context_window=1000, dynamic_tools=frozenset(),
                        new_id=lambda: f"id-{next(ids)}", now_ms=lambda: next(clock))


def _event(kind: EventKind, **payload: Any) -> AgentEvent:
    return AgentEvent(kind, payload, 0, "thread-1", 1, 0.0)


@pytest.mark.parametrize("item_id", ["msg-1", 'msg "2" \u2028 é', None])
def test_a_deltas_assembled_text_is_what_encoding_the_message_gives(item_id: str | None) -> None:
    m = _mapper()
    m.accept_turn(1, UserInput("hi"))
    m.on_event(_event(EventKind.RUN_STARTED))
    for delta in DELTAS:
        payload: dict[str, Any] = {"text": delta, "model_call_index": 0}
        if item_id is not None:
            payload["item_id"] = item_id
        outs = [out for out in m.on_event(_event(EventKind.ASSISTANT_DELTA, **payload))
                if out.method == "item/agentMessage/delta"]
        assert len(outs) == 1 and outs[0].params["delta"] == delta
        out = outs[0]
        assert out.params_text is not None
        assert notification_text(out.method, out.params_text, 1234) == encode(
            notification_message(out.method, out.params, emitted_at_ms=1234))
