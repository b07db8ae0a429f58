"""Conversation: client ids, the response chain, incremental and full inputs, snapshots."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from trio_agent._ids import ID_PREFIXES
from trio_agent._session.conversation import Conversation, ConversationSnapshot
from trio_agent._session.history import History

Item = dict[str, Any]

PREFIX: tuple[Item, ...] = (
    {"type": "additional_tools", "role": "developer", "tools": []},
    {"type": "message", "id": "msg_trio-agent-instructions", "role": "developer", "content": []},
)


class CountingIds:
    """A deterministic id_factory: ``<prefix>_<n>`` with one counter, None for id-less types."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)
        self.calls: list[str] = []

    def __call__(self, item_type: str) -> str | None:
        self.calls.append(item_type)
        prefix = ID_PREFIXES.get(item_type)
        return None if prefix is None else f"{prefix}_{next(self._counter)}"


def make() -> tuple[Conversation, CountingIds]:
    ids = CountingIds()
    return Conversation(PREFIX, ids), ids


def user(text: str) -> Item:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def tool_output(call_id: str, output: str) -> Item:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}


@pytest.mark.parametrize(
    ("item", "expected_id"),
    [
        (user("hi"), "msg_1"),
        (tool_output("c", "ok"), "ctco_1"),
        ({"type": "function_call_output", "call_id": "c", "output": "o"}, "fco_1"),
        ({"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": ""}, "ctc_1"),
        ({"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"}, "fc_1"),
        ({"type": "reasoning", "summary": []}, "rs_1"),
        ({"type": "compaction", "encrypted_content": "e"}, "cmp_1"),
        ({"type": "agent_message", "content": []}, "amsg_1"),
        ({"type": "local_shell_call"}, "lsh_1"),
        ({"type": "web_search_call"}, "ws_1"),
        ({"type": "image_generation_call"}, "ig_1"),
        ({"type": "tool_search_call"}, "tsc_1"),
        ({"type": "tool_search_output"}, "tso_1"),
        # items without a prefix mapping keep no id
        ({"type": "compaction_trigger"}, None),
        ({"type": "something_new", "x": 1}, None),
        ({"type": "additional_tools", "tools": []}, None),
    ],
)
def test_record_assigns_type_prefixed_ids(item: Item, expected_id: str | None) -> None:
    conv, ids = make()
    original = dict(item)
    [recorded] = conv.record([item])
    assert recorded.get("id") == expected_id
    assert ("id" in recorded) is (expected_id is not None)
    assert {k: v for k, v in recorded.items() if k != "id"} == original
    assert item == original  # the caller's dict is not mutated
    assert list(conv.history) == [recorded]
    assert ids.calls == [item["type"]]
    if expected_id is not None:
        assert list(recorded)[:2] == ["type", "id"]


def test_record_ids_come_from_the_factory_in_order() -> None:
    conv, _ = make()
    recorded = conv.record([user("a"), tool_output("c1", "x"), user("b")])
    assert [r["id"] for r in recorded] == ["msg_1", "ctco_2", "msg_3"]
    assert [r["id"] for r in conv.history] == ["msg_1", "ctco_2", "msg_3"]


@pytest.mark.parametrize("existing", ["msg_existing", "item-server", "x"])
def test_record_keeps_existing_ids(existing: str) -> None:
    conv, ids = make()
    item = {**user("a"), "id": existing}
    [recorded] = conv.record([item])
    assert recorded is item
    assert recorded["id"] == existing
    assert ids.calls == []


@pytest.mark.parametrize("empty", [None, ""])
def test_record_replaces_empty_ids(empty: str | None) -> None:
    conv, _ = make()
    [recorded] = conv.record([{**user("a"), "id": empty}])
    assert recorded["id"] == "msg_1"


def test_items_without_type_are_recorded_unchanged() -> None:
    conv, ids = make()
    item = {"role": "user", "content": "raw"}
    [recorded] = conv.record([item])
    assert recorded is item
    assert ids.calls == []


def test_record_response_chains_and_moves_delta_start() -> None:
    conv, _ = make()
    assert conv.previous_response_id is None
    assert conv.delta_start == 0
    assert not conv.can_chain
    conv.record([user("first")])
    assert conv.incremental_input() == [conv.history[0]]
    call = {"type": "custom_tool_call", "id": "item-exec", "call_id": "c1", "name": "exec", "input": "1"}
    reasoning = {"type": "reasoning", "summary": []}
    conv.record_response("resp-1", [reasoning, call])
    assert conv.previous_response_id == "resp-1"
    assert conv.can_chain
    assert conv.delta_start == 3 == len(conv.history)
    assert conv.incremental_input() == []
    # server ids are kept; id-less output gets a client id
    assert [item.get("id") for item in conv.history] == ["msg_1", "rs_2", "item-exec"]


def test_incremental_input_after_tool_outputs() -> None:
    conv, _ = make()
    conv.record([user("go")])
    conv.record_response("resp-1", [{"type": "custom_tool_call", "id": "ctc_9", "call_id": "c1", "input": ""}])
    outputs = conv.record([tool_output("c1", "one")])
    assert conv.incremental_input() == outputs
    steer = conv.record([user("steer")])
    assert conv.incremental_input() == [*outputs, *steer]
    assert [item["id"] for item in conv.incremental_input()] == ["ctco_2", "msg_3"]
    conv.record_response("resp-2", [{"type": "message", "id": "msg_srv", "role": "assistant", "content": []}])
    assert conv.incremental_input() == []
    follow_on = conv.record([user("next")])
    assert conv.incremental_input() == follow_on
    assert conv.previous_response_id == "resp-2"


def test_full_input_is_prefix_plus_history() -> None:
    conv, _ = make()
    assert conv.full_input() == list(PREFIX)
    conv.record([user("a")])
    conv.record_response("resp-1", [{"type": "message", "id": "msg_x", "role": "assistant", "content": []}])
    conv.record([user("b")])
    assert conv.full_input() == [*PREFIX, *conv.history]
    assert len(conv.full_input()) == len(PREFIX) + 3


def test_chain_on_warmup() -> None:
    conv, _ = make()
    conv.record([user("context")])
    conv.chain_on("warm-1")
    assert conv.previous_response_id == "warm-1"
    assert conv.delta_start == 1
    first = conv.record([user("prompt")])
    assert conv.incremental_input() == first


def test_reset_chain_forgets_the_response_id_only() -> None:
    conv, _ = make()
    conv.record([user("a")])
    conv.record_response("resp-1", [])
    conv.record([tool_output("c", "x")])
    before_history = conv.history
    conv.reset_chain()
    assert conv.previous_response_id is None
    assert not conv.can_chain
    assert conv.history is before_history
    assert conv.full_input() == [*PREFIX, *before_history]


def test_snapshot_is_o1_and_unaffected_by_later_records() -> None:
    conv, _ = make()
    conv.record([user("a")])
    conv.record_response("resp-1", [{"type": "message", "id": "msg_x", "role": "assistant", "content": []}])
    snap = conv.snapshot()
    assert isinstance(snap, ConversationSnapshot)
    assert snap.history is conv.history  # O(1): the persistent history is shared, not copied
    assert snap.prefix is conv.prefix
    assert snap.previous_response_id == "resp-1"
    assert snap.delta_start == 2
    items_then = list(snap.history)
    conv.record([user("b")])
    conv.record_response("resp-2", [])
    conv.reset_chain()
    assert list(snap.history) == items_then
    assert len(snap.history) == 2
    assert snap.previous_response_id == "resp-1"
    assert snap.delta_start == 2
    assert len(conv.history) == 3


def test_default_history_is_empty_and_not_shared() -> None:
    a, _ = make()
    b, _ = make()
    a.record([user("only a")])
    assert len(b.history) == 0
    assert isinstance(b.history, History)
