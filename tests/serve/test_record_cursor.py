"""The thread index reads a record from where its last pass stopped
(``ThreadStore.load_since``, kept per thread by ``_index_files.Files``): a pass over a
thread this server writes read its whole record, so its cost grew with the thread's
length (issue 30, item 3). What it reads is what ``load`` reads (without the turns'
items), every new line checked as ``load`` checks it; a record replaced, truncated or
rewritten in place is read from its start.

Checked without the change (``load_since`` reading the whole file each time, a fresh
state): the second read takes every line again (``taken`` is 5 + 2, not 2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_agent._errors import InvalidSessionSnapshot
from trio_agent._jsontext import dumps
from trio_agent._serve import _store
from trio_agent._serve._shapes import TurnRecord
from trio_agent._serve._store import RecordCursor, StoredThread, ThreadStore

from ._saved_threads import save_thread


def _turn(number: int) -> TurnRecord:
    return TurnRecord(f"turn-{number}", status="completed", items=[{"type": "agentMessage", "id": f"m{number}"}],
                      started_at_ms=number * 1000, completed_at_ms=number * 1000 + 500)


def _same(light: StoredThread | None, full: StoredThread | None) -> None:
    """``light`` says what ``full`` says, but for the turns' items."""
    assert light is not None and full is not None
    assert light.meta == full.meta and light.usage_total == full.usage_total
    assert light.turns == [attrs.evolve(turn, items=[]) for turn in full.turns]


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The type of every line a read takes."""
    lines: list[str] = []
    take = _store._Loading.take

    def counted(self: Any, line: dict[str, Any]) -> None:
        lines.append(line["type"])
        take(self, line)

    monkeypatch.setattr(_store._Loading, "take", counted)
    return lines


def test_a_second_read_takes_only_the_appended_lines(tmp_path: Path, taken: list[str]) -> None:
    meta = save_thread(tmp_path)  # a meta line and a turn line
    store = ThreadStore(tmp_path)
    for number in range(3):
        store.append_turn(meta.thread_id, _turn(number), {"input_tokens": number})
    stored, cursor = store.load_since(meta.thread_id, None)
    assert len(taken) == 5
    _same(stored, store.load(meta.thread_id))
    taken.clear()
    store.roll_back(meta.thread_id, 2)
    meta.name = "renamed"
    store.update(meta)
    with open(store._path(meta.thread_id), "ab") as file:
        file.write(b'{"type": "turn", "tur')  # torn: not read, not a problem
    stored, cursor = store.load_since(meta.thread_id, cursor)
    assert taken == ["rollback", "meta"]
    assert stored is not None and stored.meta.name == "renamed" and len(stored.turns) == 2
    taken.clear()
    with open(store._path(meta.thread_id), "ab") as file:  # the torn line completed
        file.write(b'n": ' + dumps(_turn(7).stored()).encode() + b', "usageTotal": null}\n')
    stored, cursor = store.load_since(meta.thread_id, cursor)
    assert taken == ["turn"]
    taken.clear()
    _same(stored, store.load(meta.thread_id))
    assert stored is not None and [turn.id for turn in stored.turns][-1] == "turn-7"


def test_a_replaced_truncated_or_rewritten_record_is_read_from_its_start(tmp_path: Path,
                                                                         taken: list[str]) -> None:
    meta = save_thread(tmp_path)
    store = ThreadStore(tmp_path)
    path = store._path(meta.thread_id)
    _stored, cursor = store.load_since(meta.thread_id, None)
    original = path.read_bytes()
    for change in ("replaced", "truncated", "rewritten"):
        taken.clear()
        meta.name = change
        if change == "replaced":  # another file (inode) under the name
            path.with_suffix(".new").write_bytes(original)
            os.replace(path.with_suffix(".new"), path)
            store.update(meta)
        elif change == "truncated":  # shorter than what was read
            with open(path, "r+b") as file:
                file.truncate(len(original.split(b"\n")[0]) + 1)
            store.update(meta)
        else:  # the same inode, as long, different bytes where the last read stopped
            data = path.read_bytes()
            path.write_bytes(data.replace(b'"truncated"', b'"TRUNCATED"'))
            store.update(meta)
        stored, cursor = store.load_since(meta.thread_id, cursor)
        assert taken[0] == "meta" and len(taken) >= 2, change  # from the first line
        assert stored is not None and stored.meta.name == change
        _same(stored, store.load(meta.thread_id))


def test_an_appended_damaged_line_is_reported_at_its_number(tmp_path: Path) -> None:
    meta = save_thread(tmp_path)
    store = ThreadStore(tmp_path)
    _stored, cursor = store.load_since(meta.thread_id, None)
    store.append_turn(meta.thread_id, _turn(1), None)
    with open(store._path(meta.thread_id), "ab") as file:
        file.write(b'{"type": "turn", "turn": {"id": 5}, "usageTotal": null}\n')
    with pytest.raises(InvalidSessionSnapshot, match=r"damaged at line 4: turn\.id is a number"):
        store.load_since(meta.thread_id, cursor)
    with pytest.raises(InvalidSessionSnapshot, match=r"damaged at line 4: turn\.id is a number"):
        store.load(meta.thread_id)


def test_no_record_is_none(tmp_path: Path) -> None:
    assert ThreadStore(tmp_path).load_since("nothing-here", None) == (None, None)
    assert isinstance(RecordCursor(1, _store._Loading()), RecordCursor)
