"""The folders of a home are the owner's alone (sec4's review).

Rollouts, thread records and the index are files made 0600, but the folders above them
were made with the umask's mode (0755 here): another local user could list every session
id and the day it ran. Every folder we create is 0700 now; a folder that exists already
is the user's choice and is left as it is (the positive control: the owner still writes
and reads everything, and a 0755 folder made by the user stays 0755).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._private_dirs import make_private_dirs
from trio_agent._serve._shapes import ThreadMeta
from trio_agent._serve._store import ThreadStore
from trio_agent.testing import FakeResponsesServer


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # what a login shell gives: folders 0755 unless asked otherwise
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def folders_between(top: Path, below: Path) -> list[Path]:
    return [below, *[p for p in below.parents if top in p.parents or p == top]]


def test_each_folder_made_on_the_way_is_the_owners_alone(tmp_path: Path) -> None:
    users = tmp_path / "users-own"
    users.mkdir(0o755)
    make_private_dirs(users / "a" / "b" / "c")
    assert [mode(p) for p in (users / "a", users / "a" / "b", users / "a" / "b" / "c")] == [0o700] * 3
    assert mode(users) == 0o755  # made by the user: left as it is
    make_private_dirs(users / "a" / "b" / "c")  # exists: nothing to do, as mkdir(exist_ok=True)
    (users / "file").write_text("x")
    with pytest.raises(FileExistsError):
        make_private_dirs(users / "file")
    with pytest.raises(NotADirectoryError):
        make_private_dirs(users / "file" / "below")


def test_plain_mkdir_would_leave_them_open(tmp_path: Path) -> None:
    """The other half of the control: the umask alone gives 0755 here."""
    (tmp_path / "x" / "y").mkdir(parents=True)
    assert mode(tmp_path / "x" / "y") == 0o755


async def test_a_rollout_home_is_made_private(tmp_path: Path) -> None:
    server = FakeResponsesServer.in_memory()
    home = tmp_path / "home"
    config = ta.AgentConfig(
        auth="k", workspace=tmp_path, session_id="private-thread", rollout=ta.RolloutConfig(home),
        responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, dialer=server.dial),
    )

    async def model() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-1", "hello")

    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        nursery.start_soon(model)
        async with ta.open_agent(config) as agent:
            assert agent.rollout is not None
            path = agent.rollout.path
            turn = await agent.prompt("hi")
            await turn.result()
        nursery.cancel_scope.cancel()
    folders = folders_between(home, path.parent)
    assert home in folders and len(folders) >= 2
    assert {p: mode(p) for p in folders} == {p: 0o700 for p in folders}
    assert mode(path) == 0o600 and path.read_text()  # the owner's file, written


def test_a_thread_store_is_made_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = ThreadStore(home)
    store.create(ThreadMeta("thread-1", created_at=1_700_000_000, cwd="/w", model="m", model_provider="openai"))
    folders = folders_between(home, store.folder)
    assert {p: mode(p) for p in folders} == {p: 0o700 for p in folders}
    assert store.load("thread-1") is not None
