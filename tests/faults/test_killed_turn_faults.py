"""Fault matrix: the files a killed ``trio-agent serve`` leaves, cut where another
kill would have cut them, or damaged (issue 23, item 2; docs/app-server.md,
"Durability").

One real server (stdio) is killed with SIGKILL while its turn runs (the model holds
the answer: the turn's start is in the rollout and the thread record). Each case
copies the home it left, changes it as the case says, and restarts a server on the
copy: ``thread/read`` and ``thread/resume`` answer, the next turn's request carries
exactly what the view shows (``conversation`` == ``shown``), and the killed turn is
shown and sent as the case expects:

- the files as the kill left them: the turn, interrupted, with its prompt;
- the record cut before its ``turn_started`` (a kill before it reached the disk): the
  same turn, restored from the rollout alone (with the rollout's id for its own);
- both cut before the turn's first line (a kill before anything reached the disk):
  no such turn, and the model gets nothing of it;
- a torn last rollout line (a write cut short): as left;
- the rollout cut after the journal's lines, before the prompt's own line (a kill in
  between): the prompt is committed on load and shown where it is sent;
- the rollout cut right after ``task_started`` (a turn-start line with no end, and
  nothing else), with and without the record's ``turn_started``: no turn, nothing sent;
- garbage after the turn-start line (a damaged line, not the last): ``thread/read``
  answers, ``thread/resume`` is an error naming the file and line, and once the line
  is removed the thread resumes and agrees.

Every server message is validated against the vendored schema. Before the fix every
case but "nothing reached the disk" failed: the killed turn was not shown while its
prompt was sent.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent.testing import AppServerClient, AppServerError, FakeResponsesServer

from ..cli._cli import cli_env
from ..serve._killed import conversation, killed, serve_args, shown, start_running_turn, text_input
from ..serve._live import STEP
from ..serve._served import served

Json = dict[str, Any]
PROMPT, NEXT = ("user", "the first prompt"), ("user", "the second prompt")
INTERRUPTED = ("interrupted", "")


class Left:
    """What the killed server left: its home, workspace, thread and turn."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home, self.workspace = root / "home", root / "workspace"
        self.thread_id = self.turn_id = ""

    def copy(self, to: Path) -> tuple[Path, Path, Path]:
        """The home copied to ``to``, with its rollout and thread record."""
        home = to / "home"
        shutil.copytree(self.home, home)
        (rollout,) = home.glob(f"sessions/**/*{self.thread_id}.jsonl")
        record = home / "app-server" / "threads" / f"{self.thread_id}.jsonl"
        assert record.exists()
        return home, rollout, record


async def _kill_a_running_turn(left: Left) -> None:
    left.workspace.mkdir()
    async with trio.open_nursery() as nursery:
        model = FakeResponsesServer()
        await nursery.start(model.serve)
        with trio.fail_after(STEP * 2):
            async with served("stdio", serve_args(left.home, model), cwd=left.root, env=cli_env(
                    OPENAI_API_KEY="sk-test")) as (server, client):
                left.thread_id, left.turn_id = await start_running_turn(client, model, left.workspace, "model")
                await killed(server, left.workspace, "model")
        nursery.cancel_scope.cancel()


@pytest.fixture(scope="module")
def left(tmp_path_factory: pytest.TempPathFactory) -> Left:
    left = Left(tmp_path_factory.mktemp("killed"))
    trio.run(_kill_a_running_turn, left)
    return left


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def cut_before(path: Path, marker: bytes, *, keep_it: bool = False) -> None:
    """``path`` as it was before its first line holding ``marker`` (with it: ``keep_it``)."""
    kept = lines(path)
    index = next(i for i, line in enumerate(kept) if marker in line)
    path.write_bytes(b"".join(kept[: index + keep_it]))


def as_left(rollout: Path, record: Path) -> None:
    assert b'"task_started"' in rollout.read_bytes() and b'"turn_started"' in record.read_bytes()


def record_lost_start(rollout: Path, record: Path) -> None:
    cut_before(record, b'"turn_started"')


def nothing_on_disk(rollout: Path, record: Path) -> None:
    cut_before(record, b'"turn_started"')
    cut_before(rollout, b'"task_started"')


def torn_last_line(rollout: Path, record: Path) -> None:
    with rollout.open("ab") as file:
        file.write(b'{"timestamp":"2026-01-01T00:00:00.000Z","type":"response_item","payload":{"type":"mess')


def prompt_not_committed(rollout: Path, record: Path) -> None:
    cut_before(rollout, b'"type":"user_message"', keep_it=True)


def start_line_alone(rollout: Path, record: Path) -> None:
    cut_before(rollout, b'"task_started"', keep_it=True)
    cut_before(record, b'"turn_started"')


def start_line_alone_record_kept(rollout: Path, record: Path) -> None:
    cut_before(rollout, b'"task_started"', keep_it=True)


CASES: dict[str, tuple[Callable[[Path, Path], None], list[tuple[str, str]], str]] = {
    # case: (change, what the next request carries before its prompt, which id the turn has)
    "as left": (as_left, [PROMPT, INTERRUPTED], "wire"),
    "record lost the start": (record_lost_start, [PROMPT, INTERRUPTED], "rollout"),
    "nothing reached the disk": (nothing_on_disk, [], ""),
    "torn last rollout line": (torn_last_line, [PROMPT, INTERRUPTED], "wire"),
    "prompt not committed": (prompt_not_committed, [PROMPT, INTERRUPTED], "wire"),
    "start line alone": (start_line_alone, [], ""),
    "start line alone, record kept": (start_line_alone_record_kept, [], ""),
}


async def agree(client: AppServerClient, model: FakeResponsesServer, thread_id: str) -> tuple[list[Json], list[Any]]:
    """Read and resume ``thread_id``, run a turn on it; its turns as read before, and
    what its request carried (which matches what the view shows)."""
    read = (await client.request("thread/read", {"threadId": thread_id, "includeTurns": True}))["thread"]
    resumed = await client.request("thread/resume", {"threadId": thread_id})
    assert resumed["thread"]["turns"] == read["turns"]
    turn = await client.request("turn/start", {"threadId": thread_id, "input": text_input("the second prompt")})
    request = await model.accept_http()
    await request.send_final("resp-2", "the answer")
    await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn["turn"]["id"])
    view = (await client.request("thread/read", {"threadId": thread_id, "includeTurns": True}))["thread"]
    said = conversation(request.body)
    assert said == shown(view["turns"])[:-1]
    assert view["turns"][: len(read["turns"])] == read["turns"]  # the restored turn, as shown before, once
    return read["turns"], said


@asynccontextmanager
async def restarted(tmp_path: Path, home: Path) -> AsyncIterator[tuple[AppServerClient, FakeResponsesServer]]:
    """A server restarted on ``home`` (stdio), initialized, and its model."""
    async with trio.open_nursery() as nursery:
        model = FakeResponsesServer()
        await nursery.start(model.serve)
        with trio.fail_after(STEP * 2):
            async with served("stdio", serve_args(home, model), cwd=tmp_path, env=cli_env(
                    OPENAI_API_KEY="sk-test")) as (_, client):
                await client.initialize(name="after-the-kill")
                yield client, model
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("case", list(CASES))
async def test_a_killed_turn_left_cut_or_torn_is_shown_as_it_is_sent(tmp_path: Path, left: Left, case: str) -> None:
    change, sent, id_from = CASES[case]
    home, rollout, record = left.copy(tmp_path)
    change(rollout, record)
    async with restarted(tmp_path, home) as (client, model):
        turns, said = await agree(client, model, left.thread_id)
    assert said == [*sent, NEXT]
    if not id_from:
        assert turns == []
        return
    (turn,) = turns
    assert turn["status"] == "interrupted"
    assert turn["items"][0]["type"] == "userMessage" and turn["items"][0]["content"] == text_input(PROMPT[1])
    assert (turn["id"] == left.turn_id) == (id_from == "wire")


async def test_garbage_after_the_turn_start_is_an_error_naming_it_until_removed(tmp_path: Path, left: Left) -> None:
    home, rollout, _ = left.copy(tmp_path)
    kept = lines(rollout)
    index = next(i for i, line in enumerate(kept) if b'"task_started"' in line) + 1
    rollout.write_bytes(b"".join([*kept[:index], b"not json at all\n", *kept[index:]]))
    async with restarted(tmp_path, home) as (client, model):
        read = await client.request("thread/read", {"threadId": left.thread_id, "includeTurns": True})
        assert read["thread"]["turns"] == []  # the record's turns; the rollout's cannot be read
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/resume", {"threadId": left.thread_id})
        assert str(rollout.name) in str(caught.value) and f"line {index + 1}" in str(caught.value)
        rollout.write_bytes(b"".join(kept))  # repaired: nothing committed was lost
        turns, said = await agree(client, model, left.thread_id)
    assert said == [PROMPT, INTERRUPTED, NEXT]
    assert [turn["id"] for turn in turns] == [left.turn_id]
