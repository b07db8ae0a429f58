"""History: a persistent, structure-sharing sequence of items."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._session.history import History


def item(n: int) -> dict[str, Any]:
    return {"type": "message", "n": n}


def test_empty() -> None:
    h = History()
    assert len(h) == 0
    assert list(h) == []
    assert h.since(0) == []
    assert h.to_list() == []
    with pytest.raises(IndexError):
        h[0]
    with pytest.raises(IndexError):
        h[-1]


def test_initial_items() -> None:
    h = History([item(0), item(1)])
    assert len(h) == 2
    assert list(h) == [item(0), item(1)]


def test_extend_since_len_iter_getitem() -> None:
    h = History().extend([item(0), item(1)]).extend([item(2)]).extend([]).append(item(3)).extend(iter([item(4)]))
    assert len(h) == 5
    assert list(h) == [item(i) for i in range(5)]
    assert h.to_list() == [item(i) for i in range(5)]
    for i in range(5):
        assert h[i] == item(i)
        assert h[i - 5] == item(i)
        assert h.since(i) == [item(j) for j in range(i, 5)]
    assert h.since(5) == []
    assert h.since(99) == []
    with pytest.raises(IndexError):
        h[5]
    with pytest.raises(IndexError):
        h[-6]


def test_extend_keeps_item_identity() -> None:
    a, b = item(0), item(1)
    h = History().extend([a]).extend([b])
    assert h[0] is a
    assert h[1] is b
    assert h.since(1)[0] is b


def test_extend_with_nothing_returns_the_same_history() -> None:
    h = History([item(0)])
    assert h.extend([]) is h
    assert h.extend(iter(())) is h


def test_old_snapshot_unchanged_after_extend() -> None:
    base = History().extend([item(0)])
    left = base.extend([item(1)])
    right = base.extend([item(2), item(3)])
    assert list(base) == [item(0)]
    assert len(base) == 1
    assert list(left) == [item(0), item(1)]
    assert list(right) == [item(0), item(2), item(3)]
    assert left.since(1) == [item(1)]
    assert right.since(1) == [item(2), item(3)]


def test_since_returns_a_fresh_list() -> None:
    h = History([item(0)]).extend([item(1)])
    out = h.since(0)
    out.append(item(99))
    out.clear()
    assert list(h) == [item(0), item(1)]


@pytest.mark.parametrize("extends", [31, 32, 33, 64, 65, 200])
def test_deep_chains_flatten_correctly(extends: int) -> None:
    h = History()
    snapshots = [h]
    for i in range(extends):
        h = h.extend([item(2 * i), item(2 * i + 1)])
        snapshots.append(h)
    expected = [item(i) for i in range(2 * extends)]
    assert len(h) == 2 * extends
    assert list(h) == expected
    for k in range(0, 2 * extends + 1, 7):
        assert h.since(k) == expected[k:]
    assert h[2 * extends - 1] == expected[-1]
    assert h[0] == expected[0]
    # every older snapshot still reads as it did
    for count, snap in enumerate(snapshots):
        assert list(snap) == expected[: 2 * count]
    # depth stays bounded (the chain is flattened every 32 segments)
    assert repr(h).startswith(f"History(len={2 * extends}, segments=")
    segments = int(repr(h).split("segments=")[1].rstrip(")"))
    assert 1 <= segments <= 33


def test_equality_is_by_content() -> None:
    a = History().extend([item(0)]).extend([item(1)])
    b = History([item(0), item(1)])
    assert a == b
    assert a != History([item(0)])
    assert a != History([item(1), item(0)])
    assert (a == [item(0), item(1)]) is False


extends_strategy = st.lists(st.lists(st.integers(min_value=0, max_value=1000).map(item), max_size=5), max_size=80)


@given(extends_strategy)
def test_random_extends_match_the_concatenation(chunks: list[list[dict[str, Any]]]) -> None:
    h = History()
    expected: list[dict[str, Any]] = []
    versions: list[tuple[History, list[dict[str, Any]]]] = [(h, [])]
    for chunk in chunks:
        h = h.extend(chunk)
        expected = expected + chunk
        versions.append((h, expected))
    assert list(h) == expected
    assert len(h) == len(expected)
    for k in range(len(expected) + 2):
        assert h.since(k) == list(h)[k:]
    for i in range(len(expected)):
        assert h[i] == expected[i]
        assert h[-(i + 1)] == expected[-(i + 1)]
    for version, items in versions:
        assert list(version) == items
        assert len(version) == len(items)


def _json_size(items: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(i, separators=(",", ":"))) for i in items)


@given(extends_strategy, st.lists(st.integers(min_value=-3, max_value=90), max_size=6), st.booleans())
def test_json_size_since_is_the_size_of_since(
    chunks: list[list[dict[str, Any]]], starts: list[int], measure_early: bool
) -> None:
    # Measured as it grows (sizes carried over the flattening) or only at the end.
    h = History()
    for chunk in chunks:
        h = h.extend([{**i, "text": "caf\u00e9 \"q\"" * (i["n"] % 3)} for i in chunk])
        if measure_early:
            assert h.json_size_since(0) == _json_size(list(h))
    for start in [0, len(h), *starts]:
        assert h.json_size_since(start) == _json_size(h.since(start)), start


# The wire text a full replay splices in (``Replay.wire``, ``_jsontext.EncodedList``)
# must be exactly what encoding the request form would produce, and the sizes counted
# from it exactly the ASCII-escaped sizes, whatever the characters and ids.
_tricky_text = st.text(alphabet=st.sampled_from(["a", "\"", "\\", "\n", "\x00", "\x7f", "\u00e9", "\u2028",
                                                  "\ud800", "\udfff", "\U0001f600", "\ufffd"]), max_size=6)
_tricky_item = st.fixed_dictionaries(
    {"type": st.sampled_from(["message", "additional_tools", "function_call"]), "text": _tricky_text},
    optional={"id": st.sampled_from(["msg_1", "rs_a_b", "bad", "_x", "x_", "_", 5, None]),
              "more": st.lists(_tricky_text, max_size=2)},
)


@given(st.lists(st.lists(_tricky_item, max_size=4), max_size=40), st.booleans())
def test_replay_wire_text_is_the_encoding_of_the_request_form(
    chunks: list[list[dict[str, Any]]], measure_early: bool
) -> None:
    from trio_agent._jsontext import EncodedList, dumps
    from trio_agent._session.conversation import full_input
    from trio_agent._wire.request import RequestSettings, build_response_create, wire_item

    settings = RequestSettings("m", "low", False, False, "key", "session")
    prefix = ({"type": "additional_tools", "id": "at_1", "tools": []},
              {"type": "message", "id": "msg_i", "role": "developer", "content": "h\u00e9"})
    h = History()
    for chunk in chunks:
        h = h.extend(chunk)
        if measure_early:
            assert h.json_size_since(0) == _json_size(list(h))
        replay = full_input(prefix, h)
        assert replay == [*prefix, *h]
        body = build_response_create(settings, replay)
        assert type(body["input"]) is EncodedList
        assert body["input"] == [wire_item(i) for i in [*prefix, *h]]
        plain = {**body, "input": list(body["input"])}
        assert dumps(body) == dumps(plain)
        body["input"].append({"type": "compaction_trigger"})  # changed in place: encoded as it is
        plain["input"].append({"type": "compaction_trigger"})
        assert dumps(body) == dumps(plain)
    for start in range(len(h) + 1):
        assert h.json_size_since(start) == _json_size(h.since(start)), start
