"""What the thread index's reading of records keeps checking now that it is cheaper
(issue 30, item 3): ``_json_lines.loads`` skips its depth walk for text with at most
``MAX_DEPTH`` opening brackets (a level of nesting opens one), ``_fields_problem``
builds its checks once per class, and ``load_since`` builds its item-less turns
directly. The bound is the same at its edge, brackets inside strings or side by side
do not refuse a shallow line, and a damaged line is named as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trio_agent._errors import InvalidSessionSnapshot
from trio_agent._json_lines import MAX_DEPTH, LineProblem, loads
from trio_agent._serve._shapes import ThreadMeta, TurnRecord
from trio_agent._serve._store import ThreadStore


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_the_depth_bound_is_the_same_at_its_edge() -> None:
    assert loads(_nested(MAX_DEPTH)) is not None
    with pytest.raises(LineProblem, match=f"deeper than {MAX_DEPTH} levels"):
        loads(_nested(MAX_DEPTH + 1))
    with pytest.raises(LineProblem, match=f"deeper than {MAX_DEPTH} levels"):
        loads(json.dumps({"a": [{"b": json.loads(_nested(MAX_DEPTH))}]}).encode())


def test_many_brackets_in_a_shallow_line_load() -> None:
    in_strings = json.dumps({"text": "[{" * (4 * MAX_DEPTH)})
    side_by_side = json.dumps({"items": [{"a": []} for _ in range(MAX_DEPTH)]})
    assert loads(in_strings) == {"text": "[{" * (4 * MAX_DEPTH)}
    assert len(loads(side_by_side)["items"]) == MAX_DEPTH


def _store(tmp_path: Path) -> tuple[ThreadStore, ThreadMeta]:
    store = ThreadStore(tmp_path)
    meta = ThreadMeta("01a2507e-1976-7d8c-b3f1-5dec92325133", created_at=1, cwd="/w", model="m",
                      model_provider="p", instructions=None)
    store.create(meta)
    return store, meta


def test_the_index_reads_turns_without_items_and_the_same_times(tmp_path: Path) -> None:
    store, meta = _store(tmp_path)
    turn = TurnRecord("t1", status="completed", items=[{"type": "agentMessage", "id": "m", "text": "x"}],
                      started_at_ms=5, completed_at_ms=9, history_end=3)
    store.append_turn(meta.thread_id, turn, {"totalTokens": 4})
    stored, _cursor = store.load_since(meta.thread_id, None)
    assert stored is not None
    assert stored.turns == [TurnRecord("t1", status="completed", started_at_ms=5, completed_at_ms=9, history_end=3)]
    full = store.load(meta.thread_id)
    assert full is not None and full.turns == [turn]  # thread/read still gets the items


@pytest.mark.parametrize(("turn", "problem"), [
    ({"status": "completed"}, "turn.id is missing"),
    ({"id": "t", "items": 5}, "turn.items is a number, not an array of objects"),
    ({"id": "t", "started_at_ms": "soon"}, "turn.started_at_ms is a string, not an integer or null"),
])
def test_a_damaged_turn_line_is_named_by_both_readers(tmp_path: Path, turn: dict[str, object], problem: str) -> None:
    store, meta = _store(tmp_path)
    record = tmp_path / "app-server" / "threads" / f"{meta.thread_id}.jsonl"
    with record.open("a") as file:
        file.write(json.dumps({"type": "turn", "turn": turn, "usageTotal": None}) + "\n")
    for read in (lambda: store.load(meta.thread_id), lambda: store.load_since(meta.thread_id, None)):
        with pytest.raises(InvalidSessionSnapshot, match=f"damaged at line 2: {problem}"):
            read()
