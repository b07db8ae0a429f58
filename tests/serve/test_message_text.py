"""A notification's text is its params encoded by the server's own C encoder, made once,
spliced after a head built once per method (issue 30, item 3): the same text, byte for
byte, as encoding the whole message with ``_jsontext.dumps`` (a ``JSONEncoder`` per call)
and escaping the line breaks -- what ``encode`` did before.

Checked over the messages of real turns (a ``ThreadMapper`` driven through a turn with
awkward text: quotes, controls, the line separators JSON leaves raw, lone surrogates,
astral characters) and over values the mapper never makes but the encoder must treat
alike (floats that are not finite, integer and enum subclasses, non-string keys, tuples,
a replay body's ``EncodedList``). And through the server's ``publish`` and ``broadcast``
(a thread's subscribers, every connection): each connection is handed exactly
``encode(notification_message(...))``.

These pass before the change too (they pin the equality that keeps the wire unchanged);
checked that they catch a difference: without the surrogate scrub on the fast path, or
with ``emittedAtMs`` left out of the spliced text, they fail.
"""

from __future__ import annotations

import enum
import itertools
import json
from typing import Any

import pytest

from trio_agent import AgentEvent, EventKind
from trio_agent._jsontext import EncodedList, dumps
from trio_agent._serve._items import ThreadMapper, UserInput
from trio_agent._serve._jsonrpc import SharedText, encode, encode_value, notification_message
from trio_agent._serve._outs import Out
from trio_agent._serve._server import AppServer

AWKWARD = ["plain", "", 'a "quoted" \\ back\\slash', "line\nbreak\r\ttab", "\u2028\u2029\u0085 separators",
           "\ud800 lone \udfff", "emoji 🚀 é ☃", "\x00\x1f\x7f controls", "</script>"]


def _reference(value: Any) -> str:
    """What ``encode_value`` was: ``dumps`` (``JSONEncoder.encode``, surrogates scrubbed),
    then U+2028, U+2029 and U+0085 escaped."""
    text = dumps(value)
    for char, escaped in (("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\u0085", "\\u0085")):
        text = text.replace(char, escaped)
    return text


def _event(kind: EventKind, **payload: Any) -> AgentEvent:
    return AgentEvent(kind, payload, 0, "thread-1", 1, 0.0)


def _turn_outs(text: str) -> list[Out]:
    """Every notification of one turn whose texts all are ``text``."""
    ids = itertools.count(1)
    clock = itertools.count(1000, 10)
    m = ThreadMapper(f"thread {text}", cwd=f"/work/{text}", model_context_window=1000, dynamic_tools=frozenset(),
                     new_id=lambda: f"id-{next(ids)}", now_ms=lambda: next(clock))
    m.accept_turn(1, UserInput(text))
    outs = m.on_event(_event(EventKind.RUN_STARTED))
    outs += m.on_event(_event(EventKind.REASONING_SUMMARY_DELTA, item_id="rs-1", text=text, call_index=0))
    for part in (text, text):
        outs += m.on_event(_event(EventKind.ASSISTANT_DELTA, item_id=f"msg {text}", text=part, model_call_index=0))
    outs += m.on_event(_event(EventKind.ASSISTANT_MESSAGE, item_id=f"msg {text}", text=text * 2))
    outs += m.on_event(_event(EventKind.MODEL_CALL_COMPLETED, call_index=0, usage={
        "input_tokens": 10, "output_tokens": 8, "total_tokens": 18, "input_tokens_details": {"cached_tokens": 5}}))
    outs += m.on_event(_event(EventKind.RUN_COMPLETED, status="completed"))
    return outs


def _corpus() -> list[tuple[str, Any]]:
    return [(f"{out.method} {index}-{position}", out.params)
            for index, text in enumerate(AWKWARD) for position, out in enumerate(_turn_outs(text))]


def test_a_real_turn_has_every_kind_of_message() -> None:
    methods = {out.method for out in _turn_outs("hi")}
    assert methods >= {"thread/status/changed", "turn/started", "item/started", "item/completed",
                       "item/agentMessage/delta", "item/reasoning/summaryTextDelta", "thread/tokenUsage/updated",
                       "turn/completed"}


@pytest.mark.parametrize(("name", "params"), _corpus(), ids=[name for name, _ in _corpus()])
def test_params_and_whole_messages_encode_as_before(name: str, params: Any) -> None:
    # (compared as ascii(): a report holding a lone surrogate breaks pytest-xdist's transport)
    assert ascii(encode_value(params)) == ascii(_reference(params))
    message = notification_message(name.split()[0], params, emitted_at_ms=1796672410304)
    assert ascii(encode(message)) == ascii(_reference(message))


class _Flag(enum.IntEnum):
    ON = 1


class _Name(enum.StrEnum):
    A = "a\u2028"


@pytest.mark.parametrize("value", [
    {"f": [0.0, -0.0, 1.5, 1e300, 5e-324, float("nan"), float("inf"), float("-inf")]},
    {"i": [0, -1, 2**70, -(2**70), True, False, None, _Flag.ON]},
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key", "s": "str key"},
    {"t": (1, "two", (3,)), "l": [[], {}, [{}]]},
    {"s": _Name.A, _Name.A: 1},
    {"deep": [[[[{"x": ["\ud83d", "\u0085"]}]]]]},
    ["a", "list", "\u2029"],
    "a bare string \u2028 \ud800",
    SharedText("a shared text"),
    17,
    None,
    {"input": EncodedList([{"type": "message"}], '[{"type":"message"}]'), "model": "m\u2028"},
])
def test_values_the_mapper_never_makes_encode_alike(value: Any) -> None:
    assert ascii(encode_value(value)) == ascii(_reference(value))


def test_what_json_cannot_encode_is_refused_with_the_same_error() -> None:
    for bad in ({"x": object()}, [b"bytes"], {("tuple", "key"): 1}, {"s": {1, 2}}):
        with pytest.raises(TypeError) as ours:
            encode_value(bad)
        with pytest.raises(TypeError) as theirs:
            _reference(bad)
        assert str(ours.value) == str(theirs.value)


class _Conn:
    initialized = True

    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None]] = []

    def send_text(self, text: str, method: str | None = None) -> None:
        self.sent.append((text, method))


class _Clock:
    def now_ms(self) -> int:
        return 1796672410304


class _Server:
    """What ``AppServer.publish`` and ``broadcast`` use of the server."""

    def __init__(self, connections: list[_Conn]) -> None:
        self.clock = _Clock()
        self._connections = set(connections)

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def broadcast(self, method: str, params: Any, emitted_at_ms: int | None = None) -> None:
        AppServer.broadcast(self, method, params, emitted_at_ms)  # type: ignore[arg-type]


class _State:
    def __init__(self, subscribers: list[_Conn]) -> None:
        self.subscribers = set(subscribers)


@pytest.mark.parametrize("subscribers", [1, 2])
@pytest.mark.parametrize("text", AWKWARD, ids=[str(index) for index in range(len(AWKWARD))])
def test_each_connection_is_handed_the_encoded_message(subscribers: int, text: str) -> None:
    conns = [_Conn() for _ in range(subscribers)]
    bystander = _Conn()  # not subscribed: gets the broadcasts alone
    server = _Server([*conns, bystander])
    outs = _turn_outs(text)
    AppServer.publish(server, _State(conns), outs)  # type: ignore[arg-type]
    expected = [(encode(notification_message(out.method, out.params, emitted_at_ms=1796672410304)), out.method)
                for out in outs]
    for conn in conns:
        assert ascii(conn.sent) == ascii(expected)
        assert all(type(sent) is (SharedText if subscribers > 1 or out.broadcast else str)
                   for (sent, _), out in zip(conn.sent, outs, strict=True))
    assert ascii(bystander.sent) == ascii([pair for pair, out in zip(expected, outs, strict=True) if out.broadcast])
    assert all(json.loads(sent)["emittedAtMs"] == 1796672410304 for sent, _ in bystander.sent)
