"""The thread record's appends (``_store.ThreadStore``): the folder is made when a write
finds it missing -- the first record, or after someone removed it -- not before every
write (a ``mkdir`` per append was a syscall per record line of every turn; issue 30).

Checked without the change: every append called ``mkdir`` (three calls where the test wants one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import attrs
import pytest

from trio_agent._jsontext import dumps
from trio_agent._private_dirs import make_private_dirs
from trio_agent._serve import _store
from trio_agent._serve._shapes import TurnRecord
from trio_agent._serve._store import ThreadStore

from ._saved_threads import save_thread


def test_the_folder_is_made_only_when_a_write_finds_it_missing(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    meta = save_thread(home, record=False)
    made: list[Path] = []

    def counted(folder: Path) -> None:
        made.append(folder)
        make_private_dirs(folder)

    monkeypatch.setattr(_store, "make_private_dirs", counted)
    store = ThreadStore(home)
    store.create(meta)  # the first record: the folder is made
    store.update(meta)
    store.update(meta)
    assert made == [store.folder]
    shutil.rmtree(store.folder)  # removed behind the server's back: the next write makes it again
    meta.name = "after the removal"
    store.update(meta)
    assert made == [store.folder, store.folder]
    stored = store.load(meta.thread_id)
    assert stored is not None and stored.meta.name == "after the removal"


def test_a_turn_line_holds_every_field_as_asdict_gives_it() -> None:
    """``TurnRecord.stored`` is written by hand (``attrs.asdict`` deep-copied the items of
    every record line): the same keys, in the same order, the same values -- a field
    added to ``TurnRecord`` and not to ``stored`` fails here."""
    turn = TurnRecord("t", status="failed", items=[{"type": "agentMessage", "id": "m", "nested": {"a": [1]}}],
                      error={"message": "x"}, started_at_ms=1, completed_at_ms=2, history_end=3)
    assert list(turn.stored().items()) == list(attrs.asdict(turn).items())
    assert dumps(turn.stored()) == dumps(attrs.asdict(turn))
    assert TurnRecord.from_stored(turn.stored()) == turn
