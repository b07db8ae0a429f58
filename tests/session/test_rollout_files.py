"""``rollout_files`` (the lookup of a thread's rollout files at every agent's start)
finds exactly what ``sessions.glob("*/*/*/rollout-*-<id>.jsonl")`` finds -- the
lookup it replaced, kept here as the oracle -- in a home with decoys: other threads'
files, dot-names, a symlinked day folder, files where folders belong, names that end
right but do not start with ``rollout-``, a folder one level too shallow or too deep,
an unreadable folder."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from trio_agent._rollout._files import rollout_files

THREAD = "01a250e6-eba1-79a8-814d-8d06dc1f7059"
OTHER = "01a250e6-ffff-79a8-814d-8d06dc1f7059"


def oracle(home: Path, thread_id: str) -> list[Path]:
    sessions = home / "sessions"
    return sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl")) if sessions.is_dir() else []


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n")
    return path


def test_finds_what_the_glob_found(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    mine = [
        touch(sessions / "2026" / "12" / "07" / f"rollout-2026-12-07T14-27-20-{THREAD}.jsonl"),
        touch(sessions / "2025" / "01" / "31" / f"rollout-2025-01-31T00-00-00-{THREAD}.jsonl"),
        touch(sessions / ".hidden" / "01" / "02" / f"rollout-x-{THREAD}.jsonl"),
        touch(sessions / "2026" / "12" / "07" / f".rollout-{THREAD}.jsonl"),  # not rollout-*: no
        touch(sessions / "2026" / "12" / "07" / f"rollout--{THREAD}.jsonl"),  # ``*`` may be empty
    ]
    touch(sessions / "2026" / "12" / "07" / f"rollout-2026-12-07T14-27-20-{OTHER}.jsonl")
    touch(sessions / "2026" / "12" / "07" / f"session-{THREAD}.jsonl")
    touch(sessions / "2026" / "12" / f"rollout-shallow-{THREAD}.jsonl")
    touch(sessions / "2026" / "12" / "07" / "deep" / f"rollout-deep-{THREAD}.jsonl")
    touch(sessions / "2026" / "12" / "file")  # a file where a day folder belongs
    (sessions / "2024" / "06").mkdir(parents=True)
    os.symlink(sessions / "2026" / "12" / "07", sessions / "2024" / "06" / "15")  # a symlinked day folder
    found = rollout_files(tmp_path, THREAD)
    assert found == oracle(tmp_path, THREAD)
    assert set(mine[:3]) | {mine[4]} <= set(found) and mine[3] not in found
    assert sessions / "2024" / "06" / "15" / mine[0].name in found


def test_an_empty_or_missing_home_has_none(tmp_path: Path) -> None:
    assert rollout_files(tmp_path / "nowhere", THREAD) == [] == oracle(tmp_path / "nowhere", THREAD)
    touch(tmp_path / "sessions")  # a file, not a folder
    assert rollout_files(tmp_path, THREAD) == []


NOBODY = 65534


def as_nobody(work: Callable[[], list[str]]) -> list[str]:
    """``work()`` in a forked child running as uid/gid 65534 (root reads any folder, so
    run as root -- as CI is -- the unreadable folder is tried by a user it is closed to)."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on, only os._exit
        status = 1
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(writable, json.dumps(work()).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(writable)
    with os.fdopen(readable, "rb") as answer:
        data = answer.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data
    found: list[str] = json.loads(data)
    return found


def test_an_unreadable_folder_is_skipped_as_the_glob_skipped_it() -> None:
    root = os.geteuid() == 0
    home = Path(tempfile.mkdtemp(prefix="trio-agent-rollouts-", dir="/var/tmp"))  # 65534 reaches it
    locked = home / "sessions" / "2026" / "11"
    try:
        mine = touch(home / "sessions" / "2026" / "12" / "07" / f"rollout-a-{THREAD}.jsonl")
        touch(locked / "01" / f"rollout-b-{THREAD}.jsonl")
        if root:
            for path in (home, *home.rglob("*")):
                os.chown(path, NOBODY, NOBODY)
        locked.chmod(0)

        def both() -> list[str]:
            found, expected = rollout_files(home, THREAD), oracle(home, THREAD)
            assert found == expected, (found, expected)
            return [str(path) for path in found]

        assert (as_nobody(both) if root else both()) == [str(mine)]
        if root:  # the positive control: whoever may read the folder finds its file too
            assert rollout_files(home, THREAD) == sorted([mine, locked / "01" / f"rollout-b-{THREAD}.jsonl"])
    finally:
        if locked.exists():
            locked.chmod(0o700)
        shutil.rmtree(home)
