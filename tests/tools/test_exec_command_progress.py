"""A running command's output as it arrives (``on_output``, the ``tool.progress`` events
``trio-agent run`` streams): decoded across reads, redacted, bounded per call, and
only while a call waits for the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._output_progress import OutputProgress
from trio_agent._tools._shell_env import REDACTED
from trio_agent._tools.exec_command import ShellSessions
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm


def test_a_character_split_across_reads_is_decoded_whole() -> None:
    chunks: list[str] = []
    progress = OutputProgress(chunks.append, ())
    data = "é ü\n".encode()
    progress.feed(data[:1])
    progress.feed(data[1:4])
    progress.feed(data[4:])
    progress.close()
    assert "".join(chunks) == "é ü\n"
    assert "\ufffd" not in "".join(chunks)


def test_a_cut_character_at_the_end_is_flushed_when_the_call_returns() -> None:
    chunks: list[str] = []
    progress = OutputProgress(chunks.append, ())
    progress.feed(b"ab\xc3")
    assert chunks == ["ab"]
    progress.close()
    assert chunks == ["ab", "\ufffd"]


def test_secrets_are_redacted_in_every_chunk() -> None:
    chunks: list[str] = []
    progress = OutputProgress(chunks.append, ("hunter2-long",))
    progress.feed(b"password hunter2-long\n")
    assert chunks == [f"password {REDACTED}\n"]


def test_a_call_streams_at_most_its_budget_then_says_how_much_was_left_out() -> None:
    chunks: list[str] = []
    progress = OutputProgress(chunks.append, (), budget=10)
    progress.feed(b"0123456")
    progress.feed(b"789abcdef")
    progress.feed(b"ghij")
    progress.close()
    assert chunks == [
        "0123456",
        "789",
        "\n[... output continues: only its first 10 bytes are streamed ...]\n",
        "[... 10 bytes of output were not streamed ...]\n",
    ]


async def test_output_arrives_while_the_command_still_runs(shell: ShellSessions, tmp_path: Path) -> None:
    chunks: list[str] = []
    first = trio.Event()

    def on_output(text: str) -> None:
        chunks.append(text)
        if "first" in "".join(chunks):
            first.set()

    # The command goes on only once the test saw its first line (a file it waits for).
    cmd = "echo first; while [ ! -e go ]; do sleep 0.01; done; echo second"
    result: dict[str, object] = {}

    async def run() -> None:
        result.update(await shell.exec_command({"cmd": cmd, "login": False}, on_output=on_output))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await first.wait()
            assert "second" not in "".join(chunks) and not result
            (tmp_path / "go").touch()
    assert "".join(chunks) == "first\nsecond\n"
    assert result["output"] == "first\nsecond\n" and result["exit_code"] == 0


async def test_a_session_streams_only_while_a_call_waits_for_it(shell: ShellSessions) -> None:
    seen: list[str] = []
    cmd = "read a; echo got $a; read b; echo then $b"
    started = await shell.exec_command({"cmd": cmd, "login": False, "yield_time_ms": 250}, on_output=seen.append)
    assert "session_id" in started and seen == []
    polled: list[str] = []
    result = await shell.write_stdin({"session_id": started["session_id"], "chars": "x\ny\n", "yield_time_ms": 5000},
                                     on_output=polled.append)
    assert result["exit_code"] == 0
    assert "".join(polled) == result["output"] == "got x\nthen y\n"
    assert seen == []  # the first call's callback is gone with that call


async def test_streamed_output_is_redacted(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", "pg-secret-123")
    sessions = ShellSessions(nursery, tmp_path)
    seen: list[str] = []
    try:
        await sessions.exec_command({"cmd": "printf '%s\\n' pg-secret-123", "login": False}, on_output=seen.append)
    finally:
        await sessions.aclose()
    assert "".join(seen) == f"{REDACTED}\n"


async def test_the_agent_reports_output_as_tool_progress_of_the_nested_call(
    server: FakeResponsesServer, workspace: Path
) -> None:
    call = json.dumps({"cmd": "echo one; echo two", "login": False})

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", f"await tools.exec_command({call});")
        await conn.next_request()
        await conn.send_final("resp-2")

    log = EventLog()
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(make_config(server, workspace, sandbox=ta.SandboxMode.DANGER_FULL_ACCESS)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("go")).result()
    nested = [e for e in log.events if e.payload.get("call_id") == "call-1/code-1"]
    kinds = [e.kind.value for e in nested]
    assert kinds[0] == "tool.call" and kinds[-1] == "tool.result"
    progress = [e.payload for e in nested if e.kind is ta.EventKind.TOOL_PROGRESS]
    assert progress and all(p["stream"] == "output" and p["tool"] == "exec_command" for p in progress)
    assert "".join(p["message"] for p in progress) == "one\ntwo\n"
    assert all(e.turn_id == 1 for e in nested)
