"""The turn ledger (the one writer of history) and the response chain: client ids,
published commits and rewrites, incremental and full inputs, snapshots."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from trio_agent._ids import ID_PREFIXES
from trio_agent._session.conversation import Chain, ConversationSnapshot, full_input
from trio_agent._session.history import History
from trio_agent._session.ledger import Committed, LedgerEvent, Rewritten, TurnLedger

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


class Follower:
    """A subscriber that keeps the chain the way the model client does."""

    def __init__(self, ledger: TurnLedger) -> None:
        self.events: list[LedgerEvent] = []
        self.chain = Chain()
        ledger.subscribe(self.on_event)

    def on_event(self, event: LedgerEvent) -> None:
        self.events.append(event)
        if isinstance(event, Committed) and event.response_id is not None:
            self.chain = self.chain.on(event.response_id, len(event.history))
        elif isinstance(event, Rewritten):
            self.chain = Chain()


def make() -> tuple[TurnLedger, CountingIds, Follower]:
    ids = CountingIds()
    ledger = TurnLedger(PREFIX, ids)
    return ledger, ids, Follower(ledger)


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
    ledger, ids, _ = make()
    original = dict(item)
    [recorded] = ledger.join_items([item])
    assert recorded.get("id") == expected_id
    assert ("id" in recorded) is (expected_id is not None)
    assert {k: v for k, v in recorded.items() if k != "id"} == original
    assert item == original  # the caller's dict is not mutated
    assert list(ledger.history) == [recorded]
    assert ids.calls == [item["type"]]
    if expected_id is not None:
        assert list(recorded)[:2] == ["type", "id"]


def test_record_ids_come_from_the_factory_in_order() -> None:
    ledger, _, _follow = make()
    recorded = ledger.join_items([user("a"), tool_output("c1", "x"), user("b")])
    assert [r["id"] for r in recorded] == ["msg_1", "ctco_2", "msg_3"]
    assert [r["id"] for r in ledger.history] == ["msg_1", "ctco_2", "msg_3"]


@pytest.mark.parametrize("existing", ["msg_existing", "item-server", "x"])
def test_record_keeps_existing_ids(existing: str) -> None:
    ledger, ids, _ = make()
    item = {**user("a"), "id": existing}
    [recorded] = ledger.join_items([item])
    assert recorded is item
    assert recorded["id"] == existing
    assert ids.calls == []


@pytest.mark.parametrize("empty", [None, ""])
def test_record_replaces_empty_ids(empty: str | None) -> None:
    ledger, _, _follow = make()
    [recorded] = ledger.join_items([{**user("a"), "id": empty}])
    assert recorded["id"] == "msg_1"


def test_items_without_type_are_recorded_unchanged() -> None:
    ledger, ids, _ = make()
    item = {"role": "user", "content": "raw"}
    [recorded] = ledger.join_items([item])
    assert recorded is item
    assert ids.calls == []


def test_record_response_chains_and_moves_delta_start() -> None:
    ledger, _, follow = make()
    assert follow.chain.previous_response_id is None
    assert follow.chain.delta_start == 0
    assert not follow.chain.can_chain
    ledger.join_items([user("first")])
    assert follow.chain.incremental_input(ledger.history) == [ledger.history[0]]
    call = {"type": "custom_tool_call", "id": "item-exec", "call_id": "c1", "name": "exec", "input": "1"}
    reasoning = {"type": "reasoning", "summary": []}
    ledger.commit_response("resp-1", [reasoning, call])
    assert follow.chain.previous_response_id == "resp-1"
    assert follow.chain.can_chain
    assert follow.chain.delta_start == 3 == len(ledger.history)
    assert follow.chain.incremental_input(ledger.history) == []
    # server ids are kept; id-less output gets a client id
    assert [item.get("id") for item in ledger.history] == ["msg_1", "rs_2", "item-exec"]


def test_incremental_input_after_tool_outputs() -> None:
    ledger, _, follow = make()
    ledger.join_items([user("go")])
    ledger.commit_response("resp-1", [{"type": "custom_tool_call", "id": "ctc_9", "call_id": "c1", "input": ""}])
    outputs = ledger.join_items([tool_output("c1", "one")])
    assert follow.chain.incremental_input(ledger.history) == outputs
    steer = ledger.join_items([user("steer")])
    assert follow.chain.incremental_input(ledger.history) == [*outputs, *steer]
    assert [item["id"] for item in follow.chain.incremental_input(ledger.history)] == ["ctco_2", "msg_3"]
    ledger.commit_response("resp-2", [{"type": "message", "id": "msg_srv", "role": "assistant", "content": []}])
    assert follow.chain.incremental_input(ledger.history) == []
    follow_on = ledger.join_items([user("next")])
    assert follow.chain.incremental_input(ledger.history) == follow_on
    assert follow.chain.previous_response_id == "resp-2"


def test_full_input_is_prefix_plus_history() -> None:
    ledger, _, _follow = make()
    assert full_input(ledger.prefix, ledger.history) == list(PREFIX)
    ledger.join_items([user("a")])
    ledger.commit_response("resp-1", [{"type": "message", "id": "msg_x", "role": "assistant", "content": []}])
    ledger.join_items([user("b")])
    assert full_input(ledger.prefix, ledger.history) == [*PREFIX, *ledger.history]
    assert len(full_input(ledger.prefix, ledger.history)) == len(PREFIX) + 3


def test_chain_on_warmup() -> None:
    ledger, _, follow = make()
    ledger.join_items([user("context")])
    follow.chain = follow.chain.on("warm-1", len(ledger.history))
    assert follow.chain.previous_response_id == "warm-1"
    assert follow.chain.delta_start == 1
    first = ledger.join_items([user("prompt")])
    assert follow.chain.incremental_input(ledger.history) == first


def test_reset_chain_forgets_the_response_id_only() -> None:
    ledger, _, follow = make()
    ledger.join_items([user("a")])
    ledger.commit_response("resp-1", [])
    ledger.join_items([tool_output("c", "x")])
    before_history = ledger.history
    follow.chain = follow.chain.reset()
    assert follow.chain.previous_response_id is None
    assert not follow.chain.can_chain
    assert ledger.history is before_history
    assert full_input(ledger.prefix, ledger.history) == [*PREFIX, *before_history]


def test_snapshot_is_o1_and_unaffected_by_later_records() -> None:
    ledger, _, follow = make()
    ledger.join_items([user("a")])
    ledger.commit_response("resp-1", [{"type": "message", "id": "msg_x", "role": "assistant", "content": []}])
    snap = ledger.snapshot(follow.chain)
    assert isinstance(snap, ConversationSnapshot)
    assert snap.history is ledger.history  # O(1): the persistent history is shared, not copied
    assert snap.prefix is ledger.prefix
    assert snap.previous_response_id == "resp-1"
    assert snap.delta_start == 2
    items_then = list(snap.history)
    ledger.join_items([user("b")])
    ledger.commit_response("resp-2", [])
    follow.chain = follow.chain.reset()
    assert list(snap.history) == items_then
    assert len(snap.history) == 2
    assert snap.previous_response_id == "resp-1"
    assert snap.delta_start == 2
    assert len(ledger.history) == 3


def test_default_history_is_empty_and_not_shared() -> None:
    a, _, _ = make()
    b, _, _ = make()
    a.join_items([user("only a")])
    assert len(b.history) == 0
    assert isinstance(b.history, History)


def test_every_append_is_published_with_the_history_after_it() -> None:
    ledger, _, follow = make()
    [context] = ledger.record_context([user("context")])
    prompt = ledger.record_prompt([{"type": "input_text", "text": "go"}])
    ledger.commit_response("resp-1", [])  # no items, but the chain must still move
    steer = ledger.join_steer("steer")
    assert [type(event) for event in follow.events] == [Committed] * 4
    first, second, third, fourth = follow.events
    assert isinstance(first, Committed) and first.items == (context,) and first.response_id is None
    assert isinstance(second, Committed) and second.items == (prompt,) and len(second.history) == 2
    assert isinstance(third, Committed) and third.items == () and third.response_id == "resp-1"
    assert isinstance(fourth, Committed) and fourth.items == (steer,)
    assert fourth.history is ledger.history
    assert follow.chain == Chain("resp-1", 2)
    assert ledger.join_items([]) == []  # nothing recorded, nothing published
    assert len(follow.events) == 4


def test_an_unchained_response_commits_its_items_without_a_response_id() -> None:
    ledger, _, follow = make()
    ledger.join_items([user("go")])
    [item] = ledger.commit_response(None, [{"type": "reasoning", "summary": []}])
    event = follow.events[-1]
    assert isinstance(event, Committed) and event.response_id is None and event.items == (item,)
    assert not follow.chain.can_chain


def test_tool_outputs_aborted_calls_and_the_marker() -> None:
    ledger, _, _ = make()
    call = {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": ""}
    function = {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"}
    note = {"type": "custom_tool_call_output", "call_id": "c1", "name": "exec", "output": "{}"}
    recorded = ledger.record_tool_output(call, "out", [note])
    assert [(item["type"], item["call_id"], item["output"]) for item in recorded] == [
        ("custom_tool_call_output", "c1", "out"), ("custom_tool_call_output", "c1", "{}")]
    aborted = ledger.pair_aborted(function, 1.5)
    assert aborted["type"] == "function_call_output" and aborted["call_id"] == "c2"
    assert aborted["output"] == "Wall time: 1.500 seconds\naborted by user"
    marker = ledger.mark_aborted()
    assert marker["role"] == "user" and "<turn_aborted>" in marker["content"][0]["text"]
    assert list(ledger.history) == [*recorded, aborted, marker]


def test_truncation_is_a_rewrite_that_says_what_stayed_the_same() -> None:
    ledger, _, follow = make()
    ledger.join_items([user("go")])
    ledger.commit_response("resp-1", [{"type": "custom_tool_call", "id": "ctc_x", "call_id": "c1", "input": ""}])
    ledger.record_tool_output({"type": "custom_tool_call", "call_id": "c1"}, "x" * 40_000)
    before = ledger.history
    assert ledger.truncate_tool_outputs(window=1_000) is True
    event = follow.events[-1]
    assert isinstance(event, Rewritten) and event.reason == "truncation"
    assert event.unchanged == 2  # the prompt and the call; the output was rewritten
    assert event.history is ledger.history and ledger.history is not before
    assert ledger.history[2]["output"] == "Output exceeded the available model context and was truncated"
    assert ledger.truncate_tool_outputs(window=1_000) is False  # already fits: no event
    assert follow.events[-1] is event


def test_installing_a_compaction_replaces_history_and_forgets_the_chain() -> None:
    ledger, _, follow = make()
    ledger.record_context([user("<environment_context>old</environment_context>")])
    ledger.record_prompt([{"type": "input_text", "text": "the task"}])
    ledger.commit_response("resp-1", [{"type": "message", "role": "assistant", "content": []}])
    assert follow.chain.can_chain
    summary = {"type": "compaction", "id": "cmp_server", "encrypted_content": "SUMMARY"}
    permissions = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "p"}]}
    context = user("<environment_context>new</environment_context>")
    installed = ledger.install_compaction(summary, permissions=permissions, context=context)
    event = follow.events[-1]
    assert isinstance(event, Rewritten) and event.reason == "compaction" and event.history is installed
    items = list(installed)
    assert [item.get("role") or item["type"] for item in items] == ["developer", "user", "user", "compaction"]
    assert items[2]["content"][0]["text"] == "the task"
    assert items[3] == {"type": "compaction", "encrypted_content": "SUMMARY"}  # the server id is dropped
    assert all(isinstance(item.get("id"), str) for item in items[:3])  # new context items got ids
    assert follow.chain == Chain()
