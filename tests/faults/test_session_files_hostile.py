"""Hostile session files and ids for ``trio-agent resume`` (issue 24, item 2), through
the installed console script: whatever a session file holds or an id says, the command
prints one line and exits 2 -- no traceback, nothing sent to the model, the file left
as it was -- or resumes what can be resumed. Each refusal has its positive control: the
same action on a sound file or a real path resumes.

- a damaged line before the last: refused, naming the file and line; bytes unchanged;
- a torn last line (a writer killed mid-write): one notice line, the session resumes and
  the file ends whole again;
- ids that are path traversals or glob patterns (``../../x``, ``..``, ``*``): never
  looked up as ids; a real path must name a rollout file inside a home;
- a huge file (sparse, beyond ``MAX_SESSION_BYTES``): refused before it is read; a
  large sound one (768 KiB of history) resumes, its history sent once;
- a newer file holding only ``session_meta`` (a warm daemon's unused spare) is not
  what ``--last`` picks;
- a session a live writer holds (its flock): refused, and the writer keeps its file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._rollout import RolloutWriter
from trio_agent._session.history import History
from trio_agent.cli._resume import MAX_SESSION_BYTES
from trio_agent.testing import FakeResponsesServer

from ..cli._console import refused, script
from ..cli._sessions import NATIVE_ID, file_lines, hinted, install_native, texts, turn, user_env

ID = "0199a000-0000-7000-8000-0000000000aa"


def our_session(home: Path, items: list[dict[str, object]], cwd: Path) -> Path:
    """A rollout of ours with ``items`` as its history."""
    folder = home / "sessions" / "2026" / "12" / "01"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-2026-12-01T10-00-00-{ID}.jsonl"
    meta = {"id": ID, "timestamp": "2026-12-01T10:00:00.000Z", "cwd": str(cwd), "originator": "test",
            "cli_version": "0", "history_mode": "legacy"}
    lines = [{"timestamp": "t", "type": "session_meta", "payload": meta},
             *({"timestamp": "t", "type": "response_item", "payload": item} for item in items)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def message(role: str, text: str) -> dict[str, object]:
    kind = "input_text" if role == "user" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


TURN = [message("user", "OLD-PROMPT"), message("assistant", "OLD-ANSWER")]


async def test_a_damaged_line_is_refused_naming_it_and_the_file_is_left_as_it_was(tmp_path: Path) -> None:
    path = our_session(tmp_path / "home", TURN, tmp_path)
    damaged = path.read_bytes().replace(b'"OLD-PROMPT"}]}}', b'"OLD-PROMPT"}]}', 1)  # line 2 is no JSON now
    path.write_bytes(damaged)
    line = refused(await script("resume", ID, "hi", cwd=tmp_path, env=user_env(tmp_path)), usage=None)
    assert line.startswith(f"trio-agent resume: error: the rollout {path} is damaged at line 2 (byte ")
    assert path.read_bytes() == damaged


async def test_a_torn_last_line_is_one_notice_and_the_session_resumes(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    path = our_session(tmp_path / "home", TURN, tmp_path)
    with path.open("ab") as file:
        file.write(b'{"timestamp":"t","type":"response_item","payload":{"type":"mess')
    ran, request = await turn(server, tmp_path, "resume", ID, "NEXT-PROMPT")
    assert ran.code == 0, ran.err
    notices = [line for line in ran.err.splitlines() if "torn line" in line]
    assert len(notices) == 1 and notices[0].startswith(f"trio-agent: the rollout {path} ends with a torn line")
    assert texts(request.body).count("OLD-PROMPT") == 1 and hinted(ran) == ID
    assert path.read_bytes().endswith(b"\n") and all(file_lines(path))  # whole lines only, again


@pytest.mark.parametrize(("ref", "says"), [
    ("../../x", "no rollout file '../../x'"),
    ("..", "'..' is not a session ID (it starts with a dot)"),
    ("*", "'*' is not a session ID (it contains '*'"),
    ("sessions/../../etc/passwd", "no rollout file"),
])
async def test_an_id_is_never_a_path_or_a_pattern(tmp_path: Path, ref: str, says: str) -> None:
    our_session(tmp_path / "home", TURN, tmp_path)  # a session exists: a pattern would match it
    line = refused(await script("resume", ref, "hi", cwd=tmp_path, env=user_env(tmp_path)), usage=None)
    assert says in line


async def test_a_path_must_name_a_rollout_file_inside_a_home(server: FakeResponsesServer, tmp_path: Path) -> None:
    inside = install_native(tmp_path / "some-home")
    outside = tmp_path / "a" / "b" / inside.name
    outside.parent.mkdir(parents=True)
    shutil.copyfile(inside, outside)
    work = tmp_path / "a" / "b" / "c" / "d"
    work.mkdir(parents=True)
    line = refused(await script("resume", f"../../{inside.name}", "hi", cwd=work, env=user_env(tmp_path)),
                   usage=None)
    assert "is not inside a rollout home (<home>/sessions/YYYY/MM/DD/)" in line
    assert outside.read_bytes() == inside.read_bytes()  # nothing appended
    ran, _ = await turn(server, tmp_path, "resume", str(inside), "hi")  # positive control: in its home
    assert ran.code == 0 and hinted(ran) == NATIVE_ID, ran.err


async def test_a_huge_file_is_refused_before_it_is_read_and_a_large_one_resumes(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    huge = our_session(tmp_path / "huge-home", TURN, tmp_path)
    with huge.open("r+b") as file:
        file.truncate(MAX_SESSION_BYTES + 1)  # sparse: costs no disk
    env = user_env(tmp_path, TRIO_AGENT_HOME=str(tmp_path / "huge-home"))
    line = refused(await script("resume", ID, "hi", cwd=tmp_path, env=env), usage=None)
    assert line == (f"trio-agent resume: error: the session file {huge} is {(MAX_SESSION_BYTES + 1) >> 20} MiB, "
                    f"more than resume reads ({MAX_SESSION_BYTES >> 20} MiB); start a new session")
    assert huge.stat().st_size == MAX_SESSION_BYTES + 1
    chunk = "x" * (24 << 10)  # 768 KiB in all: below the auto-compaction limit, so the turn is one request
    items = [message(role, f"{index}-{chunk}") for index in range(16) for role in ("user", "assistant")]
    large = our_session(tmp_path / "home", items, tmp_path)
    assert large.stat().st_size > 768 << 10
    ran, request = await turn(server, tmp_path, "resume", "--last", "NEXT-PROMPT")
    assert ran.code == 0, ran.err
    sent = texts(request.body)
    assert sum(text.endswith(chunk) for text in sent) == 32 and sent[-1] == "NEXT-PROMPT"


async def test_last_skips_a_file_that_holds_only_its_session_meta(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    our_session(tmp_path / "home", TURN, tmp_path)
    spare = tmp_path / "home" / "sessions" / "2026" / "12" / "02"
    spare.mkdir(parents=True)
    other = "0199a000-0000-7000-8000-0000000000bb"
    (spare / f"rollout-2026-12-02T10-00-00-{other}.jsonl").write_text(json.dumps(
        {"timestamp": "t", "type": "session_meta", "payload": {"id": other, "cwd": str(tmp_path)}}) + "\n")
    ran, request = await turn(server, tmp_path, "resume", "--last", "NEXT-PROMPT")
    assert ran.code == 0 and hinted(ran) == ID, ran.err
    assert texts(request.body).count("OLD-PROMPT") == 1


async def test_a_session_a_live_writer_holds_is_refused(tmp_path: Path) -> None:
    path = our_session(tmp_path / "home", TURN, tmp_path)
    durable = ta.RolloutConfig(tmp_path / "home").load_session(ID)
    writer = RolloutWriter.open(durable.rollout_config, ID, {}, History(durable.snapshot.history))
    try:
        before = path.read_bytes()
        ran = await script("resume", "--local", ID, "hi", cwd=tmp_path, env=user_env(tmp_path))
        assert (ran.code, ran.out.count("You said")) == (2, 0), ran.err
        (line,) = [line for line in ran.err.splitlines() if "locked" in line]
        assert line.startswith(f"trio-agent: the rollout {path} of session '{ID}' is locked by another live writer")
        assert path.read_bytes() == before
    finally:
        writer.close()
    ran = await script("resume", "--local", ID, "hi", cwd=tmp_path, env=user_env(tmp_path))  # positive control
    assert ran.code == 0 and "You said: 'hi'" in ran.out, ran.err
