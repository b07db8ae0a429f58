"""Fault matrix: persisted records read back (issue 21, item 8).

Rollouts, the app server's thread records, snapshots and cassettes are files anyone
(a crash, a disk, a hand edit) may have damaged. Whatever a line holds -- nesting
thousands of levels deep, the wrong JSON type at any level, a line that is not an
object, bytes that are not UTF-8, a number Python cannot read -- loading answers
with the documented error naming the file, the line and what was wrong
(``InvalidSessionSnapshot``; ``CassetteError`` for cassettes), or succeeds with values
that the code reading them next can use. Before the fix, these raised
``RecursionError``, ``TypeError`` or ``AttributeError`` (over ``trio-agent serve``:
-32603), or were skipped without a word. What is intact stays loadable: a torn last
line costs only itself, wherever the file was cut.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agent as ta
from trio_agent._cassette.format import Cassette, CassetteError
from trio_agent._jsontext import dumps
from trio_agent._rollout import RolloutError, RolloutWarning, RolloutWriter, read_history
from trio_agent._serve._dynamic import parse_dynamic_tools
from trio_agent._serve._permissions import requested_sandbox
from trio_agent._serve._reviewer import REVIEWERS
from trio_agent._serve._shapes import ThreadMeta, TurnRecord, add_usage, thread_json
from trio_agent._serve._store import ThreadStore
from trio_agent._session.history import History
from trio_agent._session.snapshot import SessionSnapshot, check_snapshot
from trio_agent._threads import ThreadStatus
from trio_agent._tools._security import ApprovalPolicy

from ._mutations import deep, encode_lines, mutated

THREAD = "durable-thread"
RECORD_THREAD = "019a0000-0000-7000-8000-000000000001"
META = {"session_id": THREAD, "id": THREAD, "cwd": "/nowhere", "model": "test",
        "base_instructions": {"text": "Be brief."}}
MUTATIONS = settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                              HealthCheck.too_slow])


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "echo", "arguments": "{}"}


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


# -- rollouts ---------------------------------------------------------------------------------


def write_rollout(home: Path) -> Path:
    """A rollout with every kind of line the loader reads: session_meta, items, a
    compaction, an event line, and an item after the compaction."""
    config = ta.RolloutConfig(home)
    writer = RolloutWriter.open(config, THREAD, META, History([message("one"), call("c1"), output("c1")]))
    writer.rewrite([message("summary"), call("c2"), output("c2")], reason="compaction")
    writer.event({"type": "note", "text": "skipped on load"})
    writer.append([message("two")])
    writer.close()
    return writer.path


ROLLOUT_HISTORY = [message("summary"), call("c2"), output("c2"), message("two")]


def rollout_lines(path: Path) -> list[Any]:
    import json

    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_an_intact_rollout_loads_and_lines_of_other_types_are_skipped(tmp_path: Path) -> None:
    path = write_rollout(tmp_path / "home")
    lines = rollout_lines(path)
    extra = [{"type": "turn_context", "payload": 5}, {"type": "something_new"},
             {"type": "compacted", "payload": {"message": "codex's older compaction line"}}]
    path.write_bytes(encode_lines([*lines, *extra]))
    durable = ta.RolloutConfig(tmp_path / "home").load_session(THREAD)
    assert durable.snapshot.history == ROLLOUT_HISTORY
    assert (durable.snapshot.model, durable.snapshot.workspace, durable.snapshot.instructions) == (
        "test", "/nowhere", "Be brief.")


# (line number, what replaces it, what the message says was wrong)
HOSTILE_ROLLOUT_LINES = [
    (3, {"type": "response_item", "payload": {"type": "message", "content": deep(100_000)}},
     "nests arrays and objects deeper than 128 levels"),
    (3, {"type": "response_item", "payload": {"type": "message", "content": deep(200)}},
     "nests arrays and objects deeper than 128 levels"),
    (2, [1, 2], "it is an array, not a JSON object"),
    (2, "text", "it is a string, not a JSON object"),
    (2, None, "it is null, not a JSON object"),
    (2, {"payload": {}}, 'it has no "type"'),
    (2, {"type": 7, "payload": {}}, 'its "type" is a number, not a string'),
    (2, {"type": "response_item", "payload": "x"}, "the payload of this response_item line is a string"),
    (2, {"type": "response_item", "payload": [message("a")]}, "the payload of this response_item line is an array"),
    (2, {"type": "response_item", "payload": {"role": "user"}}, 'the item has a "type" that is null'),
    (2, {"type": "response_item", "payload": {"type": ["message"]}}, 'the item has a "type" that is an array'),
    (3, {"type": "response_item", "payload": {**call("c1"), "call_id": 5}},
     'the item (function_call) has a "call_id" that is a number'),
    (5, {"type": "compacted", "payload": {"replacement_history": {"a": 1}}},
     "the replacement_history of this compacted line is an object, not an array"),
    (5, {"type": "compacted", "payload": {"replacement_history": [message("a"), 5]}},
     "replacement_history[1] is a number, not an object"),
    (1, {"type": "session_meta", "payload": {**META, "model": 5}}, "session_meta.model is a number"),
    (1, {"type": "session_meta", "payload": {**META, "cwd": ["/"]}}, "session_meta.cwd is an array"),
    (1, {"type": "session_meta", "payload": {**META, "base_instructions": "text"}},
     "session_meta.base_instructions is a string, not an object"),
    (1, {"type": "session_meta", "payload": {**META, "base_instructions": {"text": {}}}},
     "session_meta.base_instructions.text is an object"),
    (2, b'{"type": "response_item", "payload": {"type": "message", "x": "\xff\xfe"}}', "it is not UTF-8"),
    (2, b'{"type": "response_item", "payload": {"type": "message", "x": NaN}}', "it holds NaN, which is not JSON"),
    (2, b'{"type": "response_item", "payload": {"type": "message", "x": 1e999}}', "too large for a float"),
    (2, b'{"type": "response_item", "payload": {"type": "message", "x": ' + b"9" * 5000 + b"}}",
     "a number Python cannot read"),
]


@pytest.mark.parametrize(("number", "line", "problem"), HOSTILE_ROLLOUT_LINES)
def test_a_hostile_rollout_line_is_an_error_naming_file_line_and_problem(
    tmp_path: Path, number: int, line: Any, problem: str
) -> None:
    path = write_rollout(tmp_path / "home")
    lines = rollout_lines(path)
    lines[number - 1] = line
    path.write_bytes(encode_lines(lines))
    config = ta.RolloutConfig(tmp_path / "home")
    loads = [lambda: config.load_session(THREAD), lambda: read_history(path),
             lambda: RolloutWriter.open(config, THREAD, META, History([message("one")]))]
    for load in loads:
        with pytest.raises(ta.InvalidSessionSnapshot) as caught:
            load()
        assert f"the rollout {path} is damaged at line {number} (byte " in str(caught.value)
        assert problem in str(caught.value)
        assert "repair or remove that line" in str(caught.value)
    # The same line, torn (no newline: never committed), costs only itself.
    whole = encode_lines(lines[: number - 1])
    path.write_bytes(whole + encode_lines([line])[:-1])
    if number > 1:
        with pytest.warns(RolloutWarning, match="torn line"):
            assert config.load_session(THREAD).snapshot.history == _history_of(lines[: number - 1])


def _history_of(lines: list[Any]) -> list[Any]:
    history: list[Any] = []
    for line in lines:
        if line["type"] == "response_item":
            history.append(line["payload"])
        elif line["type"] == "compacted":
            history = list(line["payload"]["replacement_history"])
    return history


def test_a_rollout_cut_at_any_byte_keeps_every_whole_line(tmp_path: Path) -> None:
    path = write_rollout(tmp_path / "home")
    data = path.read_bytes()
    lines = rollout_lines(path)
    config = ta.RolloutConfig(tmp_path / "home")
    ends = [index + 1 for index, byte in enumerate(data) if byte == ord("\n")]
    for cut in range(ends[0], len(data) + 1):  # from the first whole line (the session_meta) on
        path.write_bytes(data[:cut])
        whole = sum(1 for end in ends if end <= cut)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            history = config.load_session(THREAD).snapshot.history
        assert history[: len(_history_of(lines[:whole]))] == _history_of(lines[:whole])
        assert bool(caught) == (cut not in ends), cut  # warned exactly when a torn line was skipped


def _usable(durable: ta.DurableSession) -> None:
    """What reads a loaded session next: a snapshot round trip, the resume checks."""
    snapshot = durable.snapshot
    assert SessionSnapshot.from_json(snapshot.to_json_text()) == snapshot
    assert SessionSnapshot.from_json(snapshot.to_json()) == snapshot
    try:
        check_snapshot(snapshot, explicit_cache_key=None)
    except ta.InvalidSessionSnapshot:
        pass


@MUTATIONS
@given(data=st.data())
def test_a_mutated_rollout_loads_or_raises_invalid_session_snapshot(tmp_path: Path, data: st.DataObject) -> None:
    home = Path(tempfile.mkdtemp(dir=tmp_path))  # each example its own
    path = write_rollout(home)
    content, edits = mutated(data, rollout_lines(path))
    path.write_bytes(content)
    config = ta.RolloutConfig(home)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RolloutWarning)  # a torn last line is allowed
        try:
            durable = config.load_session(THREAD)
        except ta.InvalidSessionSnapshot as exc:
            assert str(path) in str(exc), (edits, str(exc))
        else:
            _usable(durable)
        try:
            read_history(path)
        except ta.InvalidSessionSnapshot as exc:
            assert str(path) in str(exc), (edits, str(exc))
        try:
            RolloutWriter.open(config, THREAD, META, History([message("resumed")])).close()
        except (ta.InvalidSessionSnapshot, RolloutError) as exc:
            assert str(path) in str(exc), (edits, str(exc))


# -- snapshots ------------------------------------------------------------------------------


def _snapshot() -> dict[str, Any]:
    return SessionSnapshot("test", "lineage", "key", "/w", [], [message("one")]).to_json()


@pytest.mark.parametrize(("given_", "problem"), [
    ('{"history": ' + "[" * 100_000, "nests arrays and objects deeper than 128 levels"),
    ("[]", "it is an array, not a JSON object"),
    (b"\xff{}", "it is not UTF-8"),
    ('{"version": NaN}', "it holds NaN"),
    ("nope", "it is not JSON"),
])
def test_a_hostile_snapshot_text_is_invalid_session_snapshot(given_: str | bytes, problem: str) -> None:
    with pytest.raises(ta.InvalidSessionSnapshot, match="this is not a trio_agent session snapshot") as caught:
        SessionSnapshot.from_json(given_)
    assert problem in str(caught.value)


def test_a_hostile_snapshot_object_is_invalid_session_snapshot() -> None:
    nested: Any = 0
    for _ in range(5000):
        nested = [nested]
    cases = [({**_snapshot(), "history": [{"type": "message", "content": nested}]}, "deeper than 128 levels"),
             ({**_snapshot(), "history": 5}, "expected list @ snapshot.history"),
             ({**_snapshot(), "model": None}, "expected str @ snapshot.model"),
             ([_snapshot()], "it is an array, not a JSON object")]
    for value, problem in cases:
        with pytest.raises(ta.InvalidSessionSnapshot) as caught:
            SessionSnapshot.from_json(value)  # type: ignore[arg-type]
        assert problem in str(caught.value)
    assert SessionSnapshot.from_json(_snapshot()).history == [message("one")]  # the positive control


# -- thread records (trio-agent serve) ---------------------------------------------------------


def write_record(home: Path) -> Path:
    """Lines: 1 meta, 2 turn-1, 3 meta (renamed, archived, a policy), 4 turn-2, 5 turn-3,
    6 a rollback keeping two turns."""
    store = ThreadStore(home)
    meta = ThreadMeta(RECORD_THREAD, created_at=1_700_000_000, cwd="/w", model="m", model_provider="openai",
                      dynamic_tools=[{"name": "lookup", "description": "Look up.", "inputSchema": {"type": "object"}}],
                      sandbox={"type": "workspaceWrite", "networkAccess": False, "writableRoots": []},
                      approvals_reviewer="auto_review")
    store.create(meta)
    turn = TurnRecord("turn-1", "completed", [{"type": "userMessage", "id": "i1", "content": []}], None,
                      1_700_000_000_000, 1_700_000_001_000, history_end=4)
    store.append_turn(RECORD_THREAD, turn, {"totalTokens": 10, "inputTokens": 7, "outputTokens": 3})
    meta.approval_policy, meta.name, meta.archived = "never", "the record", True
    store.update(meta)
    store.append_turn(RECORD_THREAD, TurnRecord("turn-2", "failed", [], {"message": "boom"}), None)
    store.append_turn(RECORD_THREAD, TurnRecord("turn-3", "completed", [], history_end=9), None)
    store.roll_back(RECORD_THREAD, 2)
    return store._path(RECORD_THREAD)


def _record_usable(stored: Any) -> None:
    """What the server does next with a record: thread/read's views, usage sums,
    the thread's tools, sandbox and approvals on a cold resume."""
    meta = stored.meta
    dumps(thread_json(meta, ThreadStatus.NOT_LOADED, path=None, turns=stored.turns))
    for turn in stored.turns:
        for view in ("notLoaded", "summary", "full"):
            dumps(turn.to_json(view))
    if stored.usage_total is not None:
        add_usage(stored.usage_total, stored.usage_total)
    parse_dynamic_tools(meta.dynamic_tools)
    if meta.sandbox is not None:
        try:
            requested_sandbox(meta.sandbox)
        except ta.ConfigError:  # e.g. a writable root that no longer exists: the resume says so
            pass
    if meta.approval_policy is not None:
        ApprovalPolicy(meta.approval_policy)
    assert meta.approvals_reviewer in (None, *REVIEWERS)
    assert all(turn.history_end is None or turn.history_end >= 0 for turn in stored.turns)


HOSTILE_RECORD_LINES = [
    (2, {"type": "turn", "turn": {"id": "t", "items": deep(100_000)}}, "deeper than 128 levels"),
    (2, 42, "it is a number, not a JSON object"),
    (2, {"turn": {}}, 'it has no "type"'),
    (1, {"type": "meta", "meta": "x"}, "its 'meta' is a string, not an object"),
    (1, {"type": "meta", "meta": {"thread_id": RECORD_THREAD}}, "meta.created_at is missing"),
    (3, {"type": "meta", "meta": {"thread_id": RECORD_THREAD, "created_at": "now", "cwd": "/", "model": "m",
                                  "model_provider": "p"}}, "meta.created_at is a string, not an integer"),
    (3, {"type": "meta", "meta": {"thread_id": "someone-else", "created_at": 1, "cwd": "/", "model": "m",
                                  "model_provider": "p"}}, "not this file's thread"),
    (3, {"type": "meta", "meta": {"thread_id": RECORD_THREAD, "created_at": 1, "cwd": "/", "model": "m",
                                  "model_provider": "p", "sandbox": {"type": "everything"}}},
     "is not a SandboxPolicy"),
    (3, {"type": "meta", "meta": {"thread_id": RECORD_THREAD, "created_at": 1, "cwd": "/", "model": "m",
                                  "model_provider": "p", "approval_policy": "always"}}, "is not an approval policy"),
    (3, {"type": "meta", "meta": {"thread_id": RECORD_THREAD, "created_at": 1, "cwd": "/", "model": "m",
                                  "model_provider": "p", "dynamic_tools": [{"name": 5}]}},
     "meta.dynamic_tools: dynamicTools[0]: `name` must be a non-empty string"),
    (2, {"type": "turn", "turn": {"id": "t", "items": [5]}}, "turn.items is an array, not an array of objects"),
    (2, {"type": "turn", "turn": {"id": "t", "started_at_ms": "soon"}}, "turn.started_at_ms is a string"),
    (2, {"type": "turn", "turn": {"id": 5}}, "turn.id is a number, not a string"),
    (2, {"type": "turn", "turn": {"id": "t"}, "usageTotal": {"totalTokens": "many"}}, "its usageTotal is an object"),
    (3, {"type": "meta", "meta": {"thread_id": RECORD_THREAD, "created_at": 1, "cwd": "/", "model": "m",
                                  "model_provider": "p", "approvals_reviewer": "robot"}},
     "meta.approvals_reviewer 'robot' is not one of user, auto_review, guardian_subagent"),
    (3, {"type": "meta", "meta": {"thread_id": RECORD_THREAD, "created_at": 1, "cwd": "/", "model": "m",
                                  "model_provider": "p", "name": 5}}, "meta.name is a number, not a string or null"),
    (3, {"type": "meta", "meta": {"thread_id": RECORD_THREAD, "created_at": 1, "cwd": "/", "model": "m",
                                  "model_provider": "p", "archived": "yes"}},
     "meta.archived is a string, not true/false"),
    (2, {"type": "turn", "turn": {"id": "t", "history_end": "end"}}, "turn.history_end is a string, not an integer"),
    (6, {"type": "rollback", "turns": 4}, "it keeps 4 turns, but 3 are listed before it"),
    (6, {"type": "rollback", "turns": -1}, "it keeps -1 turns"),
    (6, {"type": "rollback", "turns": "2"}, "its turns is a string, not an integer"),
    (6, {"type": "rollback"}, "its turns is null, not an integer"),
    (6, {"type": "rollback", "turns": True}, "its turns is true/false, not an integer"),
    (2, {"type": "turn", "turn": {"id": "t"}, "restored": "yes"}, "its restored is a string, not true/false"),
    (2, {"type": "turn_started", "turn": "t"}, "its 'turn' is a string, not an object"),
    (2, {"type": "turn_started", "turn": {"id": 5}}, "turn.id is a number, not a string"),
    (2, {"type": "turn_started", "turn": {"id": "t"}, "rolloutTurnId": 5}, "its rolloutTurnId is a number"),
    (2, {"type": "item", "turnId": 5, "item": {"type": "x", "id": "i"}}, "its turnId is a number, not a string"),
    (2, {"type": "item", "turnId": "t", "item": []}, "its item is an array, not an object"),
    (2, {"type": "item", "turnId": "t", "item": {"type": "x"}}, "its item.id is null, not a string"),
    (2, b'{"type": "turn", "turn": {"id": "\xff"}}', "it is not UTF-8"),
    (2, b'{"type": "turn", "turn": {"id": "t", "started_at_ms": ' + b"9" * 5000 + b"}}", "cannot read"),
]


@pytest.mark.parametrize(("number", "line", "problem"), HOSTILE_RECORD_LINES)
def test_a_hostile_thread_record_line_is_an_error_naming_file_line_and_problem(
    tmp_path: Path, number: int, line: Any, problem: str
) -> None:
    path = write_record(tmp_path)
    lines = rollout_lines(path)
    lines[number - 1] = line
    path.write_bytes(encode_lines(lines))
    with pytest.raises(ta.InvalidSessionSnapshot) as caught:
        ThreadStore(tmp_path).load(RECORD_THREAD)
    assert f"the thread record {path} is damaged at line {number}: " in str(caught.value)
    assert problem in str(caught.value)
    # The same line torn (never committed) costs only itself.
    path.write_bytes(encode_lines(lines[: number - 1]) + encode_lines([line])[:-1])
    stored = ThreadStore(tmp_path).load(RECORD_THREAD)
    assert (stored is None) == (number == 1)


def test_an_intact_thread_record_loads_whole_and_a_torn_line_costs_only_itself(tmp_path: Path) -> None:
    path = write_record(tmp_path)
    stored = ThreadStore(tmp_path).load(RECORD_THREAD)
    assert stored is not None
    assert [t.id for t in stored.turns] == ["turn-1", "turn-2"] and stored.meta.approval_policy == "never"
    assert (stored.meta.name, stored.meta.archived, stored.meta.approvals_reviewer) == ("the record", True,
                                                                                       "auto_review")
    assert [t.history_end for t in stored.turns] == [4, None]
    assert stored.usage_total == {"totalTokens": 10, "inputTokens": 7, "outputTokens": 3}
    _record_usable(stored)
    data = path.read_bytes()
    path.write_bytes(data + encode_lines([{"type": "future_line", "x": 1}]))  # a newer server's: skipped
    assert ThreadStore(tmp_path).load(RECORD_THREAD) == stored
    path.write_bytes(data[:-5])  # the rollback line torn: never committed
    stored = ThreadStore(tmp_path).load(RECORD_THREAD)
    assert stored is not None and [t.id for t in stored.turns] == ["turn-1", "turn-2", "turn-3"]


def test_a_record_written_before_names_archiving_reviewers_and_cut_points_loads_with_their_defaults(
    tmp_path: Path,
) -> None:
    path = ThreadStore(tmp_path)._path(RECORD_THREAD)
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_lines([
        {"type": "meta", "meta": {"thread_id": RECORD_THREAD, "created_at": 1, "cwd": "/w", "model": "m",
                                  "model_provider": "openai", "approval_policy": "never"}},
        {"type": "turn", "turn": {"id": "turn-1", "status": "completed", "items": []}, "usageTotal": None},
    ]))
    stored = ThreadStore(tmp_path).load(RECORD_THREAD)
    assert stored is not None and [t.id for t in stored.turns] == ["turn-1"]
    assert (stored.meta.name, stored.meta.archived, stored.meta.approvals_reviewer) == (None, False, None)
    assert stored.turns[0].history_end is None
    _record_usable(stored)


@MUTATIONS
@given(data=st.data())
def test_a_mutated_thread_record_loads_or_raises_invalid_session_snapshot(
    tmp_path: Path, data: st.DataObject
) -> None:
    home = Path(tempfile.mkdtemp(dir=tmp_path))  # each example its own
    path = write_record(home)
    content, edits = mutated(data, rollout_lines(path))
    path.write_bytes(content)
    try:
        stored = ThreadStore(home).load(RECORD_THREAD)
    except ta.InvalidSessionSnapshot as exc:
        assert str(path) in str(exc), (edits, str(exc))
    else:
        if stored is not None:
            _record_usable(stored)


# -- cassettes ----------------------------------------------------------------------------------


def test_a_deep_or_undecodable_cassette_line_is_a_cassette_error(tmp_path: Path) -> None:
    from .test_cassette_faults import body, header, text

    good = text(header(), body())
    Cassette.loads(good)  # the positive control
    lines = good.split("\n")
    path = tmp_path / "session.jsonl"
    for replacement, problem in [(encode_lines([{"t": 0, "kind": "ws.send", "conn": 1, "text": deep(100_000)}]),
                                  "nests arrays and objects deeper than 128 levels"),
                                 (b'{"t": NaN, "kind": "end"}\n', "it holds NaN"),
                                 (b'{"t": 0, "kind": "ws.send", "conn": 1, "text": "\xff"}\n', "not UTF-8")]:
        damaged = "\n".join(lines[:2]).encode() + b"\n" + replacement + "\n".join(lines[3:]).encode()
        path.write_bytes(damaged)
        with pytest.raises(CassetteError) as caught:
            Cassette.load(path)
        assert str(caught.value).startswith(f"{path}, line 3: ") and problem in str(caught.value)
