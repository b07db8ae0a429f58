"""The server's own record of each durable thread, beside its rollout.

``<home>/app-server/threads/<thread id>.jsonl``: one ``meta`` line when the thread is
created (model, cwd, dynamic tools, instructions: what a cold resume must rebuild),
then one ``turn`` line per finished turn (its wire id, status, items and times, and
the thread's token usage total), so ``thread/read``, ``thread/list`` and a cold
``thread/resume`` show the same turns, with the same ids, as the live thread did. A
later ``meta`` line replaces the settings (a name, archiving, an override); a
``rollback`` line (``{"type": "rollback", "turns": N}``, ``thread/rollback``) keeps
the first N turns listed before it. The rollout stays the truth of the conversation
(what the model sees); this file is the protocol's view of it. Ephemeral threads write
nothing.

A turn is also recorded while it runs (``_turn_durability``), so a server killed in
the middle leaves it behind: a ``turn_started`` line when it starts (``{"type":
"turn_started", "turn": <the turn so far: id, input, start>, "rolloutTurnId": <the
rollout journal's id of it>}``), an ``item`` line (``{"type": "item", "turnId": <its
id>, "item": <the item>}``) each time one of its tool items starts or completes. Its
``turn`` line supersedes them; a ``turn_started`` without one is ``StoredThread.
unfinished``. A ``turn`` line written for such a turn once it is restored carries
``"restored": true`` (and, for one the record never saw start, the rollout's id as its
id); ``StoredThread.rollout_turns`` are the rollout ids the record has seen.

Each line is one ``os.write`` on an ``O_APPEND`` descriptor (the rollout's policy): a
torn last line left by a killed process (what follows the last newline) is skipped
when read. A loaded thread's descriptor stays open between its appends (``hold`` when
the server loads it, ``release`` when it closes, ``close`` at shutdown: at most one
descriptor per loaded thread): an open and a close per line were most of an append's
cost, twice or more a turn (issue 30). Nothing about durability changes: a line is
in the OS when its write returns, as before (no fsync, then or now), and a killed
server leaves what it wrote. The server never moves or removes a record; one removed
behind its back while its thread is loaded takes that thread's appends until it
unloads (a thread not loaded reopens the path per line, as before). Writing never
fails a turn: an ``OSError`` is reported once on stderr and the thread goes on.

Reading checks every whole line as far as the server relies on it, and anything else
is damage: ``InvalidSessionSnapshot`` naming the file, the line and what was wrong
(over the protocol, the request's -32600 error). A line must be UTF-8 JSON within
``_json_lines``' bounds, an object with a string ``type``; a ``meta`` line's fields
have the types ``ThreadMeta`` declares (the required ones present, ``thread_id`` the
file's own, ``sandbox`` a stored ``SandboxPolicy``, ``approval_policy`` a policy name,
``approvals_reviewer`` a reviewer name, ``dynamic_tools`` what ``thread/start``
accepts); a ``turn`` line's those of ``TurnRecord`` (items objects, times and
``history_end`` integers), its ``usageTotal`` null or token counts and its ``restored``
true/false if present; a ``turn_started`` line's ``turn`` the same and its
``rolloutTurnId`` a string or null; an ``item`` line's ``turnId`` a string and its
``item`` an object with a string ``type`` and ``id`` (one for a turn the lines before
it do not show running is skipped); a ``rollback`` line's ``turns`` an integer from 0
to the number of turns listed before it. Fields a record written before them lacks
take their defaults (an older record loads as it always did). Lines of other types
are skipped (a newer server's).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._errors import InvalidSessionSnapshot
from .._json_lines import LineProblem, json_kind, loads, untyped
from .._jsontext import dumps
from .._private_dirs import make_private_dirs
from .._tools._security import ApprovalPolicy
from ._dynamic import parse_dynamic_tools
from ._jsonrpc import InvalidParams
from ._reviewer import REVIEWERS
from ._shapes import ThreadMeta, TurnRecord

__all__ = ["RecordCursor", "StartedTurn", "StoredThread", "ThreadStore"]


@attrs.frozen
class StartedTurn:
    """A turn the record saw start and not end: ``record`` as it started (id, input,
    start time), the rollout journal's ``rollout_turn_id`` of it, and its tool
    ``items`` as last recorded, by id, in the order they first appeared."""

    record: TurnRecord
    rollout_turn_id: str | None
    items: dict[str, dict[str, Any]] = attrs.field(factory=dict)


@attrs.frozen
class StoredThread:
    meta: ThreadMeta
    turns: list[TurnRecord]
    usage_total: dict[str, Any] | None
    unfinished: list[StartedTurn] = attrs.field(factory=list)  # started, never ended (oldest first)
    rollout_turns: frozenset[str] = frozenset()  # the rollout journal's ids of the turns the record has seen


class ThreadStore:
    def __init__(self, home: Path) -> None:
        self.folder = home / "app-server" / "threads"
        self._reported = False
        self.on_write: Callable[[str], None] | None = None  # told each thread whose record was written (the index)
        # told each thread before its record is written: the index, whose writer thread may
        # read the file between the write and ``on_write``, must already know it as this server's
        self.before_write: Callable[[str], None] | None = None
        self._held: dict[str, int | None] = {}  # loaded threads: their record's descriptor, once opened

    def hold(self, thread_id: str) -> None:
        """The thread is loaded: its record's descriptor, once an append opens it, stays
        open until ``release``."""
        self._held.setdefault(thread_id, None)

    def release(self, thread_id: str) -> None:
        """The thread is no longer loaded: close its record's descriptor (if open)."""
        fd = self._held.pop(thread_id, None)
        if fd is not None:
            _close(fd)

    def close(self) -> None:
        """Shutdown: every held descriptor closed (appends after it open and close the
        file per line)."""
        held, self._held = self._held, {}
        for fd in held.values():
            if fd is not None:
                _close(fd)

    def _path(self, thread_id: str) -> Path:
        return self.folder / f"{thread_id}.jsonl"

    def _append(self, thread_id: str, line: dict[str, Any]) -> None:
        data = (dumps(line) + "\n").encode("utf-8")
        if self.before_write is not None:
            self.before_write(thread_id)
        held = self._held
        try:
            fd = held.get(thread_id)
            keep = fd is not None or thread_id in held
            if fd is None:
                fd = self._open(thread_id)
                if keep:
                    held[thread_id] = fd
            try:
                written = os.write(fd, data)
                if written < len(data):
                    view = memoryview(data)[written:]
                    while view:
                        view = view[os.write(fd, view):]
            except OSError:
                if keep and held.get(thread_id) == fd:
                    held[thread_id] = None  # reopened by the next append
                    _close(fd)
                raise
            finally:
                if not keep:
                    os.close(fd)
            if self.on_write is not None:
                self.on_write(thread_id)
        except OSError as exc:
            if not self._reported:
                self._reported = True
                print(f"trio-agent serve: cannot write the thread record under {self.folder}: {exc}; "
                      "thread/read and cold resumes will miss turns", file=sys.stderr)

    def _open(self, thread_id: str) -> int:
        path, flags = os.path.join(self.folder, f"{thread_id}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            return os.open(path, flags, 0o600)
        except FileNotFoundError:  # no folder yet (or it was removed): a mkdir only then, not per write
            make_private_dirs(self.folder)
            return os.open(path, flags, 0o600)

    def create(self, meta: ThreadMeta, turns: Sequence[TurnRecord] = ()) -> None:
        self._append(meta.thread_id, {"type": "meta", "meta": meta.to_json()})
        for turn in turns:
            self._append(meta.thread_id, {"type": "turn", "turn": turn.stored(), "usageTotal": None})

    def update(self, meta: ThreadMeta) -> None:
        """The thread's settings changed (a sandbox or approval override): the last
        ``meta`` line is the one ``load`` returns."""
        self._append(meta.thread_id, {"type": "meta", "meta": meta.to_json()})

    def append_turn(self, thread_id: str, turn: TurnRecord, usage_total: dict[str, Any] | None, *,
                    restored: bool = False) -> None:
        line: dict[str, Any] = {"type": "turn", "turn": turn.stored(), "usageTotal": usage_total}
        if restored:
            line["restored"] = True
        self._append(thread_id, line)

    def turn_started(self, thread_id: str, turn: TurnRecord, rollout_turn_id: str | None) -> None:
        """A turn started: its record so far (id, input, start time)."""
        self._append(thread_id, {"type": "turn_started", "turn": turn.stored(), "rolloutTurnId": rollout_turn_id})

    def turn_item(self, thread_id: str, turn_id: str, item: dict[str, Any]) -> None:
        """One of a running turn's items, as it is now (started or completed)."""
        self._append(thread_id, {"type": "item", "turnId": turn_id, "item": item})

    def roll_back(self, thread_id: str, keep: int) -> None:
        """``thread/rollback``: the thread keeps its first ``keep`` turns."""
        self._append(thread_id, {"type": "rollback", "turns": keep})

    def load(self, thread_id: str) -> StoredThread | None:
        """The thread's record, or None when it has none (not made by this server).
        Raises ``InvalidSessionSnapshot`` for a damaged line (see the module docstring)."""
        path = self._path(thread_id)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        loaded = _Loading()
        whole = data[: data.rfind(b"\n") + 1]  # what follows the last newline is torn: never committed
        _take_lines(loaded, whole, path, thread_id, 0)
        if loaded.meta is None:
            return None
        return StoredThread(loaded.meta, loaded.turns, loaded.usage, list(loaded.started.values()),
                            frozenset(loaded.rollout_turns))

    def load_since(
        self, thread_id: str, cursor: RecordCursor | None
    ) -> tuple[StoredThread | None, RecordCursor | None]:
        """``load`` for the thread index, reading only the lines appended since ``cursor``
        (None: from the start), each checked as ``load`` checks it: a pass over a thread
        written by this server cost its whole record, so a long thread's turns cost
        more and more (issue 30). The file is read from the start when it is another
        one (its inode), shorter than what was read, or no longer ends, where the
        cursor stopped, with the bytes it last read (rewritten in place). Its turns
        carry no items (the index needs their count and times); what it returns is
        copied from the cursor's state, which goes on. Raises as ``load`` does (the
        cursor is then spent: pass None next time)."""
        path = self._path(thread_id)
        try:
            with open(path, "rb") as file:
                inode = os.fstat(file.fileno()).st_ino
                if cursor is not None and cursor.inode == inode and cursor.offset >= len(cursor.tail):
                    file.seek(cursor.offset - len(cursor.tail))
                    data = file.read()
                    if not data.startswith(cursor.tail):
                        cursor = None
                    else:
                        data = data[len(cursor.tail):]
                else:
                    cursor = None
                if cursor is None:
                    file.seek(0)
                    data = file.read()
        except OSError:
            return None, None
        if cursor is None:
            cursor = RecordCursor(inode, _Loading(light=True))
        end = data.rfind(b"\n") + 1  # what follows the last newline is torn: never committed
        cursor.lines = _take_lines(cursor.loading, data[:end], path, thread_id, cursor.lines)
        if end:
            cursor.offset += end
            cursor.tail = data[max(0, end - _TAIL):end]
        loaded = cursor.loading
        if loaded.meta is None:
            return None, cursor
        return StoredThread(attrs.evolve(loaded.meta), list(loaded.turns), loaded.usage), cursor


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass  # nothing more to write through it


_TAIL = 64  # bytes a cursor keeps of what it last read, to see a record rewritten in place


@attrs.define(eq=False)
class RecordCursor:
    """Where ``ThreadStore.load_since`` stopped in a record: its inode, the bytes read
    (whole lines), the last ``_TAIL`` of them, the lines read and what they said."""

    inode: int
    loading: _Loading
    offset: int = 0
    tail: bytes = b""
    lines: int = 0


def _take_lines(loaded: _Loading, whole: bytes, path: Path, thread_id: str, before: int) -> int:
    """Check and take the whole lines ``whole`` (the record's lines after its first
    ``before``); how many lines are read in all."""
    number = before
    for number, raw in enumerate(whole.split(b"\n")[:-1], start=before + 1):
        try:
            line = loads(raw)
            problem = _line_problem(line, thread_id, len(loaded.turns))
        except LineProblem as exc:
            problem = str(exc)
        if problem is not None:
            raise InvalidSessionSnapshot(
                f"the thread record {path} is damaged at line {number}: {problem}. Only a torn last line (one "
                "without its newline) is skipped; repair or remove that line, or remove the file (the thread "
                "then resumes from its rollout alone, without the turns this record lists)"
            )
        loaded.take(line)
    return number


class _Loading:
    """A record being read, line by line (each line already checked); ``light``: its
    turns kept without their items (``load_since``)."""

    def __init__(self, *, light: bool = False) -> None:
        self.light = light
        self.meta: ThreadMeta | None = None
        self.turns: list[TurnRecord] = []
        self.usage: dict[str, Any] | None = None
        self.started: dict[str, StartedTurn] = {}
        self.rollout_turns: set[str] = set()

    def take(self, line: dict[str, Any]) -> None:
        kind = line["type"]
        if kind == "meta":
            self.meta = ThreadMeta.from_json(line["meta"])
        elif kind == "turn":
            turn = TurnRecord.from_stored(line["turn"], items=not self.light)
            self.turns.append(turn)
            self.started.pop(turn.id, None)
            if line.get("restored") is True:
                self.rollout_turns.add(turn.id)
            if line.get("usageTotal") is not None:
                self.usage = line["usageTotal"]
        elif kind == "turn_started":
            turn = TurnRecord.from_stored(line["turn"])
            self.started[turn.id] = StartedTurn(turn, line.get("rolloutTurnId"))
            if line.get("rolloutTurnId") is not None:
                self.rollout_turns.add(line["rolloutTurnId"])
        elif kind == "item":
            started = self.started.get(line["turnId"])
            if started is not None:
                started.items[line["item"]["id"]] = line["item"]
        elif kind == "rollback":
            del self.turns[line["turns"]:]


# -- checking what is read ---------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# A field's annotation (as written in _shapes) -> (what it must be, the check).
_FIELD_TYPES: dict[str, tuple[str, Callable[[object], bool]]] = {
    "str": ("a string", lambda v: isinstance(v, str)),
    "int": ("an integer", _is_int),
    "bool": ("true/false", lambda v: isinstance(v, bool)),
    "str | None": ("a string or null", lambda v: v is None or isinstance(v, str)),
    "int | None": ("an integer or null", lambda v: v is None or _is_int(v)),
    "Json | None": ("an object or null", lambda v: v is None or isinstance(v, dict)),
    "list[Json]": ("an array of objects", lambda v: isinstance(v, list) and all(isinstance(i, dict) for i in v)),
}


_CHECKS: dict[type, tuple[tuple[str, bool, str, Callable[[object], bool]], ...]] = {}  # per class, once (issue 30)


def _fields_problem(cls: type[ThreadMeta] | type[TurnRecord], data: dict[str, Any], what: str) -> str | None:
    checks = _CHECKS.get(cls) or _CHECKS.setdefault(cls, tuple(
        (field.name, field.default is attrs.NOTHING, *_FIELD_TYPES[str(field.type)]) for field in attrs.fields(cls)))
    for name, required, expected, check in checks:
        if name not in data:
            if required:
                return f"{what}.{name} is missing"
            continue
        if not check(data[name]):
            return f"{what}.{name} is {json_kind(data[name])}, not {expected}"
    return None


def _line_problem(line: object, thread_id: str, turns: int) -> str | None:
    """What is wrong with one line (None: nothing); ``turns``: how many turns the lines
    before it list."""
    problem = untyped(line)
    if problem is not None or not isinstance(line, dict):
        return problem
    kind = line["type"]
    if kind == "rollback":
        keep = line.get("turns")
        if not isinstance(keep, int) or isinstance(keep, bool):
            return f"its turns is {json_kind(keep)}, not an integer"
        if not 0 <= keep <= turns:
            return f"it keeps {keep} turns, but {turns} are listed before it"
        return None
    if kind == "item":
        return _item_line_problem(line)
    if kind not in ("meta", "turn", "turn_started"):
        return None
    field = "meta" if kind == "meta" else "turn"
    body = line.get(field)
    if not isinstance(body, dict):
        return f"its {field!r} is {json_kind(body)}, not an object"
    if kind == "meta":
        return _fields_problem(ThreadMeta, body, "meta") or _meta_problem(body, thread_id)
    if kind == "turn_started":
        rollout_turn = line.get("rolloutTurnId")
        if rollout_turn is not None and not isinstance(rollout_turn, str):
            return f"its rolloutTurnId is {json_kind(rollout_turn)}, not a string or null"
        return _fields_problem(TurnRecord, body, "turn")
    usage = line.get("usageTotal")
    if usage is not None and not (isinstance(usage, dict) and all(_is_int(v) for v in usage.values())):
        return f"its usageTotal is {json_kind(usage)}, not token counts (an object of integers) or null"
    if "restored" in line and not isinstance(line["restored"], bool):
        return f"its restored is {json_kind(line['restored'])}, not true/false"
    return _fields_problem(TurnRecord, body, "turn")


def _item_line_problem(line: dict[str, Any]) -> str | None:
    turn_id, item = line.get("turnId"), line.get("item")
    if not isinstance(turn_id, str):
        return f"its turnId is {json_kind(turn_id)}, not a string"
    if not isinstance(item, dict):
        return f"its item is {json_kind(item)}, not an object"
    for key in ("type", "id"):
        if not isinstance(item.get(key), str):
            return f"its item.{key} is {json_kind(item.get(key))}, not a string"
    return None


def _meta_problem(meta: dict[str, Any], thread_id: str) -> str | None:
    """What ``_fields_problem`` cannot see: values the server parses further."""
    if meta["thread_id"] != thread_id:
        return f"meta.thread_id is {meta['thread_id']!r:.80}, not this file's thread {thread_id}"
    sandbox = meta.get("sandbox")
    if sandbox is not None and not _stored_sandbox(sandbox):
        return (f"meta.sandbox {str(sandbox)[:200]} is not a SandboxPolicy "
                "(readOnly, workspaceWrite or dangerFullAccess)")
    policy = meta.get("approval_policy")
    if policy is not None and policy not in {p.value for p in ApprovalPolicy}:
        return f"meta.approval_policy {policy!r:.80} is not an approval policy"
    reviewer = meta.get("approvals_reviewer")
    if reviewer is not None and reviewer not in REVIEWERS:
        return f"meta.approvals_reviewer {reviewer!r:.80} is not one of {', '.join(REVIEWERS)}"
    try:
        parse_dynamic_tools(meta.get("dynamic_tools"))
    except InvalidParams as exc:
        return f"meta.dynamic_tools: {exc.message.removeprefix('thread/start: ')}"
    return None


def _stored_sandbox(sandbox: dict[str, Any]) -> bool:
    roots = sandbox.get("writableRoots", [])
    return (sandbox.get("type") in ("readOnly", "workspaceWrite", "dangerFullAccess")
            and isinstance(sandbox.get("networkAccess", False), bool)
            and isinstance(roots, list) and all(isinstance(root, str) for root in roots))
