"""Fault matrix, class 4: rollout durability (issue 8).

What a rollout promises, tried with real processes killed by SIGKILL: every item
committed before the kill loads, exactly once; a torn last line is skipped on load and
cut off when the file is resumed; one live writer per thread (an advisory lock, also
across processes, released when its holder dies); fsync as often as the policy says;
a write the kernel cuts short is rolled back. The child processes are
``tests/faults/_rollout_child.py``.

Torn lines: a real kill in the middle of one ``os.write`` cannot be timed, so the child
stages one -- it appends the first bytes of a genuine rollout line (cut inside a UTF-8
character) through its own descriptor and is then SIGKILLed. The partial write of the
rollback test is real: the kernel cuts it short at ``RLIMIT_FSIZE``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import trio_agent as ta
from trio_agent._rollout import RolloutWarning, RolloutWriter, read_history
from trio_agent._session.history import History
from trio_agent.testing import FakeResponsesServer, frames

from .._helpers import content_texts
from .._os_facts import pid_alive, wait_gone
from ..conftest import make_config, scripted, warm
from ._rollout_child import COMMITTED, agent_config, blocking_tools, torn_fragment

ROOT = Path(ta.__file__).resolve().parent.parent
THREAD = "durable-thread"
CHILD_DEADLINE = 30  # seconds: a child imports trio_agent and runs two turns


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it (from each process's parent pid)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return [p for p in found if pid_alive(p)]


class Child:
    """A child process of ``_rollout_child``; its stderr goes to a file for failures."""

    def __init__(self, process: trio.Process, stderr: Path) -> None:
        self.process = process
        self.stderr = stderr
        self._buffer = b""

    async def wait_for_line(self, marker: str) -> None:
        assert self.process.stdout is not None
        while marker.encode() + b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some()
            if not chunk:
                pytest.fail(f"the child exited before printing {marker!r}:\n{self.stderr.read_text()}")
            self._buffer += chunk

    async def sigkill(self) -> None:
        """SIGKILL the child; return once it and everything it started are gone."""
        pids = descendants(self.process.pid)
        self.process.send_signal(signal.SIGKILL)
        assert await self.process.wait() == -signal.SIGKILL
        await wait_gone(pids)
        assert not any(pid_alive(pid) for pid in pids)


@asynccontextmanager
async def child_process(tmp_path: Path, *args: str) -> AsyncIterator[Child]:
    stderr = tmp_path / f"child-{len(list(tmp_path.glob('child-*')))}.stderr"
    with stderr.open("wb") as err:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.faults._rollout_child", *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=err, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        yield Child(process, stderr)
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


def answer_child(server: FakeResponsesServer, bodies: list[dict[str, Any]]) -> Any:
    """The model side of the ``agent`` child: a first turn, then ``note`` and ``block``."""

    async def script() -> None:
        first = await server.accept_http()
        bodies.append(first.body)
        await first.send_final("resp-1", "first answer")
        for response_id, name in (("resp-2", "note"), ("resp-3", "block")):
            request = await server.accept_http()
            bodies.append(request.body)
            # No server item ids: with store=False the replay leaves them out.
            call = frames.function_call(f"call-{name}", name, "{}")
            await request.send_sse([frames.completed(response_id, [call])])

    return script


def committed_by_the_child(bodies: list[dict[str, Any]], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the child had committed when it printed ``COMMITTED``: everything its last
    request replayed (after the two prefix items), then the ``block`` call."""
    replayed = bodies[-1]["input"][2:]
    block = history[len(replayed)]
    assert (block["type"], block["call_id"], block["name"]) == ("function_call", "call-block", "block")
    return [*replayed, block]


def identity(item: dict[str, Any]) -> tuple[str, str]:
    return item["type"], item.get("id") or item["call_id"]


def rollout_file(home: Path) -> Path:
    path = ta.RolloutConfig(home).find(THREAD)
    assert path is not None
    return path


async def resume_and_finish(server: FakeResponsesServer, workspace: Path, durable: ta.DurableSession) -> dict[str, Any]:
    """Resume ``durable`` in this process, run one turn; the request it sent."""
    thread, snapshot, rollout = durable.into_parts()
    config = agent_config(server.http_base_url, str(rollout.home), str(workspace), thread, blocking_tools(trio.Event()))
    sent: list[dict[str, Any]] = []

    async def script() -> None:
        request = await server.accept_http()
        sent.append(request.body)
        await request.send_final("resp-resumed", "resumed answer")

    async with scripted(script), ta.open_agent(attrs.evolve(config, resume=snapshot)) as agent:
        assert (await (await agent.prompt("after the crash")).result()).final_message == "resumed answer"
    (body,) = sent
    assert body["input"][2:-1] == durable.snapshot.history  # the whole session, the interrupted turn closed
    return body


META = {"session_id": THREAD, "id": THREAD, "cwd": "/nowhere", "model": "test"}


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


# -- a committed item is in the OS when it is committed ------------------------------------


async def test_every_item_committed_before_a_sigkill_loads_exactly_once(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home, bodies = tmp_path / "home", []
    async with scripted(answer_child(server, bodies), CHILD_DEADLINE):
        async with child_process(tmp_path, "agent", server.http_base_url, str(home), str(workspace), THREAD) as child:
            await child.wait_for_line(COMMITTED)
            await child.sigkill()
    _, written = read_history(rollout_file(home))
    expected = committed_by_the_child(bodies, written)
    assert written == expected  # every committed item, in order, none twice
    assert len(set(map(identity, written))) == len(written)
    assert [t for item in written if item["type"] == "message" for t in content_texts(item)][-3:] == [
        "first prompt", "first answer", "second prompt"
    ]
    durable = ta.RolloutConfig(home).load_session(THREAD)
    assert durable.interrupted_calls == ("call-block",)
    assert durable.snapshot.history[: len(written)] == written
    aborted, marker = durable.snapshot.history[len(written):]
    assert (aborted["type"], aborted["call_id"]) == ("function_call_output", "call-block")
    assert "the session ended" in aborted["output"]
    assert content_texts(marker)[0].startswith("<turn_aborted>")


# -- fsync policies -------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["flush", "commit"])
async def test_the_fsync_policy_decides_when_the_rollout_reaches_the_disk(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    home = (tmp_path / "home").resolve()
    synced: list[int] = []  # the rollout's size at each fsync of it
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        real_fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(home)):
            synced.append(os.fstat(fd).st_size)

    monkeypatch.setattr(os, "fsync", spy)

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "note", "{}")
        await conn.next_request()
        await conn.send_final("resp-2", "noted")

    async def note(ctx: ta.ToolContext, args: Any) -> str:
        return "noted"

    tools = ta.Tools.default().function("note", "Take a note.", {"type": "object"}, note)
    config = make_config(server, workspace, tools=tools, rollout=ta.RolloutConfig(home, fsync=policy))  # type: ignore[arg-type]
    async with scripted(script), ta.open_agent(config) as agent:
        assert agent.rollout is not None
        size = agent.rollout.path.stat().st_size
        assert synced == ([size] if policy == "commit" else [])  # the session_meta line
        await (await agent.prompt("take a note")).result()
        data = agent.rollout.path.read_bytes()
        size = len(data)
        if policy == "commit":  # every write (one commit: whole lines) fsynced as soon as it was written
            ends = [index + 1 for index, byte in enumerate(data) if byte == ord("\n")]
            # meta, task_started, user_message, the context (two lines, one write), the
            # prompt, the call, its output, the answer, agent_message, task_complete
            assert synced == ends[:3] + ends[4:] and len(ends) == 11
        else:
            assert synced == []
        await agent.flush_rollout()
        assert synced[-1] == size
        flushed = len(synced)
    assert len(synced) == flushed + 1 and synced[-1] == size  # closing fsyncs too


@pytest.mark.parametrize("policy", ["always", "", None, True])
def test_an_unknown_fsync_policy_is_a_config_error(tmp_path: Path, policy: object) -> None:
    with pytest.raises(ta.ConfigError, match="pass fsync='flush' or fsync='commit'"):
        ta.RolloutConfig(tmp_path, fsync=policy)  # type: ignore[arg-type]
    assert ta.RolloutConfig(tmp_path).fsync == "flush"


# -- a torn last line, damage, line separators -------------------------------------------


async def test_a_torn_last_line_is_skipped_on_load_and_cut_off_on_resume(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home, bodies = tmp_path / "home", []
    args = ("agent", server.http_base_url, str(home), str(workspace), THREAD, "torn")
    async with scripted(answer_child(server, bodies), CHILD_DEADLINE), child_process(tmp_path, *args) as child:
        await child.wait_for_line(COMMITTED)
        await child.sigkill()
    path = rollout_file(home)
    fragment = torn_fragment()
    assert path.read_bytes().endswith(fragment) and not fragment.endswith(b"\n")
    with pytest.warns(RolloutWarning, match=rf"ends with a torn line \({len(fragment)} bytes without a newline") as w:
        durable = ta.RolloutConfig(home).load_session(THREAD)
    with pytest.warns(RolloutWarning, match="torn line") as w2:
        _, written = read_history(path)
    assert w[0].filename == w2[0].filename == __file__  # the warning points at the caller
    assert written == committed_by_the_child(bodies, written)  # everything but the fragment
    assert durable.interrupted_calls == ("call-block",)

    with pytest.warns(RolloutWarning, match="cut it off before appending"):
        await resume_and_finish(server, workspace, durable)
    data = path.read_bytes()
    assert data.endswith(b"\n") and fragment not in data
    # Loads cleanly now (any warning fails the test): the old items, the closed turn, the new one.
    history = ta.RolloutConfig(home).load_session(THREAD).snapshot.history
    assert history[: len(durable.snapshot.history)] == durable.snapshot.history
    assert [t for item in history[len(durable.snapshot.history):] for t in content_texts(item)] == [
        "after the crash", "resumed answer"
    ]


def test_a_damaged_line_before_the_last_is_an_error_that_says_where(tmp_path: Path) -> None:
    config = ta.RolloutConfig(tmp_path / "home")
    writer = RolloutWriter.open(config, THREAD, META, History([message("one"), message("two")]))
    writer.close()
    lines = writer.path.read_bytes().split(b"\n")
    offset = len(lines[0]) + 1 + len(lines[1]) + 1
    lines[2] = lines[2][:30]  # line 3 of 3, cut short but followed by its newline
    writer.path.write_bytes(b"\n".join(lines))
    for load in (lambda: config.load_session(THREAD), lambda: read_history(writer.path)):
        with pytest.raises(ta.InvalidSessionSnapshot) as damaged:
            load()
        assert f"the rollout {writer.path} is damaged at line 3 (byte {offset})" in str(damaged.value)
        assert "repair or remove that line" in str(damaged.value)
    with pytest.raises(ta.InvalidSessionSnapshot, match="damaged at line 3"):
        RolloutWriter.open(config, THREAD, META, History())


def test_line_separators_inside_text_stay_inside_their_line(tmp_path: Path) -> None:
    config = ta.RolloutConfig(tmp_path / "home")
    items = [message("a\u2028b\u2029c\x85d\x0be\x1cf\rg"), message("next")]
    RolloutWriter.open(config, THREAD, META, History(items)).close()
    assert config.load_session(THREAD).snapshot.history == items


def test_a_file_holding_only_a_torn_session_meta_line_starts_over(tmp_path: Path) -> None:
    config = ta.RolloutConfig(tmp_path / "home")
    writer = RolloutWriter.open(config, THREAD, META, History())
    writer.close()
    whole = writer.path.read_bytes()
    writer.path.write_bytes(whole[:-10])
    with pytest.warns(RolloutWarning, match="cut it off before appending"):
        RolloutWriter.open(config, THREAD, META, History([message("one")])).close()
    assert config.load_session(THREAD).snapshot.history == [message("one")]


# -- one live writer per thread -----------------------------------------------------------


async def test_a_writer_in_another_process_locks_the_rollout_until_it_is_killed(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home, bodies = tmp_path / "home", []
    args = ("agent", server.http_base_url, str(home), str(workspace), THREAD)
    async with scripted(answer_child(server, bodies), CHILD_DEADLINE), child_process(tmp_path, *args) as child:
        await child.wait_for_line(COMMITTED)
        path = rollout_file(home)
        before = path.read_bytes()
        same = agent_config(server.http_base_url, str(home), str(workspace), THREAD, blocking_tools(trio.Event()))
        with pytest.raises(ta.RolloutError) as refused:
            async with ta.open_agent(same):
                pytest.fail("a second writer of a live rollout was started")
        message = str(refused.value)
        assert str(path) in message and "locked by another live writer" in message
        assert "close that agent first, or open this one with another session_id" in message
        assert path.read_bytes() == before  # the refused writer wrote nothing
        live = ta.RolloutConfig(home).load_session(THREAD)  # reading takes no lock
        await child.sigkill()
    durable = ta.RolloutConfig(home).load_session(THREAD)
    assert path.read_bytes() == before
    assert durable.snapshot.history[:-2] == live.snapshot.history[:-2] == read_history(path)[1]
    await resume_and_finish(server, workspace, durable)  # the kernel released the dead writer's lock
    after = ta.RolloutConfig(home).load_session(THREAD).snapshot.history
    assert [t for item in after[-2:] for t in content_texts(item)] == ["after the crash", "resumed answer"]


async def test_a_second_agent_of_the_same_session_is_refused_and_the_first_keeps_working(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "still here")
        resumed = await server.accept()
        await resumed.next_request()
        await resumed.send_final("resp-2", "resumed")

    config = make_config(server, workspace, rollout=ta.RolloutConfig(tmp_path / "home"))  # session "model-test"
    async with scripted(script):
        async with ta.open_agent(config) as first:
            assert first.rollout is not None
            with pytest.raises(ta.RolloutError, match="locked by another live writer") as refused:
                async with ta.open_agent(config):
                    pytest.fail("a second writer of a live rollout was started")
            assert str(first.rollout.path) in str(refused.value)
            assert len(server.handshakes) <= 1  # the refused agent never connected
            assert (await (await first.prompt("go on")).result()).final_message == "still here"
            await first.flush_rollout()
        # Closing released the lock: the same thread resumes in the same file.
        durable = ta.RolloutConfig(tmp_path / "home").load_session("model-test")
        thread, snapshot, rollout = durable.into_parts()
        async with ta.open_agent(make_config(server, workspace, session_id=thread, resume=snapshot,
                                             rollout=rollout)) as again:
            await (await again.prompt("again")).result()
            assert again.rollout is not None and again.rollout.path == first.rollout.path


def test_a_new_writer_that_raced_another_for_the_same_new_thread_gives_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ta.RolloutConfig(tmp_path / "home")
    first = RolloutWriter.open(config, THREAD, META, History())
    # The second writer's lookup ran before the first file existed (two processes starting
    # the same thread at once): it creates a file of its own, sees the live rival, gives way.
    monkeypatch.setattr(ta.RolloutConfig, "find", lambda self, thread_id: None)
    monkeypatch.setattr(ta.RolloutConfig, "new_path", lambda self, thread_id: first.path.with_name("later.jsonl"))
    try:
        with pytest.raises(ta.RolloutError, match="locked by another live writer") as refused:
            RolloutWriter.open(config, THREAD, META, History())
        assert str(first.path) in str(refused.value)
        assert not first.path.with_name("later.jsonl").exists()
    finally:
        first.close()


# -- a write the kernel cuts short ---------------------------------------------------------


async def test_a_write_cut_short_by_the_kernel_is_rolled_back(tmp_path: Path) -> None:
    with trio.fail_after(CHILD_DEADLINE):
        async with child_process(tmp_path, "efbig", str(tmp_path / "home"), THREAD) as child:
            assert child.process.stdout is not None
            output = b""
            while chunk := await child.process.stdout.receive_some():
                output += chunk
            assert await child.process.wait() == 0, child.stderr.read_text()
    report = json.loads(output)
    assert report["after_failure"] == report["whole"]  # the partial line was cut off again
    assert report["final"] == report["recovered"] > report["whole"]
    (warning,) = report["warnings"]
    assert warning.startswith("RolloutWarning: cannot append to") and "File too large" in warning
    assert "the rollout may miss history committed since its last flush" in warning
    _, history = read_history(Path(report["path"]))  # no warning: the file ends at a whole line
    assert [content_texts(item)[0][:1] for item in history] == ["s", "x"]  # the bigger item never made it
