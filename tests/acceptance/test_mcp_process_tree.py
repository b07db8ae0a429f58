"""Every process a stdio MCP server starts dies with it (issue 21, item 8).

``tests/fixtures/mcp_daemon_server.py`` is the test MCP server after it started a
daemon: a grandchild that ``setsid``\\s and is orphaned by a double fork, so the SDK's
SIGTERM/SIGKILL to the server's process group cannot reach it (``--stubborn``: it also
ignores SIGTERM). The daemon must be gone, by pid, once the agent has closed, once the
agent was cancelled, and once the agent's process was SIGKILLed. The positive
control: while the agent is open the daemon is alive, in a session of its own. On
main the daemon outlived every one of these.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from .._os_facts import pid_alive, processes_in, wait_for_os_fact, wait_gone
from ..conftest import EventLog, make_config, scripted, warm

FIXTURES = Path(__file__).parent.parent / "fixtures"
ROOT = Path(ta.__file__).resolve().parent.parent


def _session_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[3])


@contextmanager
def _daemon_killed_at_the_end(pid_file: Path) -> Iterator[None]:
    """Never leave a daemon behind, even when the test fails (as it does on main)."""
    try:
        yield
    finally:
        if pid_file.exists() and pid_alive(pid := int(pid_file.read_text())):
            os.kill(pid, signal.SIGKILL)


def _with_daemon_server(tmp_path: Path, *extra: str) -> tuple[Path, ta.Tools, EventLog]:
    """The daemon's pid file, tools with the daemon server, an event log."""
    pid_file = tmp_path / "daemon.pid"
    server = ta.McpServer.stdio(sys.executable, [str(FIXTURES / "mcp_daemon_server.py"), str(pid_file), *extra,
                                                 "--pid-file", f"{pid_file}.server"])
    return pid_file, ta.Tools.default().with_mcp("daemons", server), EventLog()


async def _running_daemon(log: EventLog, pid_file: Path) -> tuple[int, int]:
    """``(server pid, daemon pid)`` once the server is up and its daemon runs, in a
    session of its own (the positive control)."""
    ready = await log.wait_for(lambda e: e.kind in (ta.EventKind.MCP_SERVER_READY, ta.EventKind.MCP_SERVER_FAILED))
    assert ready.kind is ta.EventKind.MCP_SERVER_READY, ready.payload
    await wait_for_os_fact(pid_file.exists, "the daemon writing its pid")
    server, daemon = int(Path(f"{pid_file}.server").read_text()), int(pid_file.read_text())
    assert pid_alive(server) and pid_alive(daemon)
    assert _session_of(daemon) != _session_of(server)  # out of the server's session (and so its group)
    return server, daemon


@pytest.mark.parametrize("stubborn", [False, True], ids=["daemon", "daemon ignoring SIGTERM"])
async def test_a_daemon_of_a_stdio_server_is_gone_when_the_agent_closes(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, stubborn: bool
) -> None:
    pid_file, tools, log = _with_daemon_server(tmp_path, *(["--stubborn"] if stubborn else []))

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1")

    with _daemon_killed_at_the_end(pid_file):
        async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("hello")).result()
            server_pid, daemon = await _running_daemon(log, pid_file)
            assert pid_alive(daemon)  # still alive after a whole turn
        # Gone by the time open_agent returns: the supervisor exits only after its whole tree.
        assert not pid_alive(server_pid) and not pid_alive(daemon)
        assert processes_in(workspace) == []


async def test_a_daemon_of_a_stdio_server_is_gone_once_the_server_crashed(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    pid_file, tools, log = _with_daemon_server(tmp_path)
    crash = "try { await tools.mcp__daemons__crash({}); } catch (e) { text(e.message.split('\\n')[0]); }"
    outputs: list[list[dict[str, str]]] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await _running_daemon(log, pid_file)
        await conn.send_tool_call("resp-1", "call-1", "exec", crash)
        outputs.append((await conn.next_request())["input"][0]["output"])
        await conn.send_final("resp-2")

    with _daemon_killed_at_the_end(pid_file):
        async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("crash it")).result()
            assert outputs[0][1]["text"].startswith("MCP tool daemons/crash failed: MCPError: Connection closed")
            # The agent is still open: the server's whole tree ended with the server.
            await wait_gone([int(pid_file.read_text())])


async def test_a_daemon_of_a_stdio_server_is_gone_when_the_agent_is_cancelled(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    pid_file, tools, log = _with_daemon_server(tmp_path)
    pids: list[int] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()  # the turn waits here until the agent is cancelled
        pids.extend(await _running_daemon(log, pid_file))
        cancelled.cancel()
        await trio.sleep_forever()

    with _daemon_killed_at_the_end(pid_file), trio.CancelScope() as cancelled:
        async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("work")).result()
    assert cancelled.cancelled_caught and len(pids) == 2
    assert not any(pid_alive(pid) for pid in pids)


async def test_a_daemon_of_a_stdio_server_is_gone_when_the_agent_process_is_killed(tmp_path: Path) -> None:
    pid_file, workspace = tmp_path / "daemon.pid", tmp_path / "workspace"
    workspace.mkdir()
    with _daemon_killed_at_the_end(pid_file), (tmp_path / "child.stderr").open("wb") as err:
        child = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.acceptance._mcp_agent_child", str(workspace), str(pid_file)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=err, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert child.stdout is not None
            line = b""
            with trio.fail_after(30):
                while not line.endswith(b"\n"):
                    chunk = await child.stdout.receive_some()
                    assert chunk, (tmp_path / "child.stderr").read_text()
                    line += chunk
            server_pid, daemon = int(line.split()[1]), int(pid_file.read_text())
            assert pid_alive(server_pid) and pid_alive(daemon)  # the positive control
            child.send_signal(signal.SIGKILL)  # no shutdown runs: no stdin closed by the SDK, no SIGTERM
            await child.wait()
            await wait_gone([daemon, server_pid])
        finally:
            if child.returncode is None:
                child.kill()
            with trio.CancelScope(shield=True):
                await child.wait()
