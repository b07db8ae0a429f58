"""Through a live agent: daemons started by ``tools.exec_command`` end with their command,
their turn or their agent (real processes, checked by pid)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

from .._os_facts import pid_alive, wait_for_os_fact, wait_gone, wait_no_processes_in
from ..conftest import events_of, make_config, run_model, scripted, warm

# These tests read processes' pids with `$$`, which are host pids only outside a sandbox's
# PID namespace: they pin the unsandboxed (subreaper) path; tests/acceptance/test_sandbox_lifetime.py
# covers the sandboxed one.
HOST_PIDS = ta.SandboxMode.DANGER_FULL_ACCESS


def _publish(path: Path, what: str = "$$") -> str:
    return f"echo {what} > {path}.tmp && mv {path}.tmp {path}"


def _daemons(workspace: Path) -> tuple[str, list[Path]]:
    """Shell code starting a ``setsid`` daemon and a double-fork daemon (each in a new
    session), returning once both wrote their pid files."""
    setsid_pid, forked_pid = workspace / "setsid.pid", workspace / "forked.pid"
    setsid_daemon = f"setsid sh -c '{_publish(setsid_pid)}; exec sleep 300' </dev/null >/dev/null 2>&1 &"
    double_fork = f"( setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & {_publish(forked_pid, '$!')}' & )"
    wait = f"while [ ! -e {setsid_pid} ] || [ ! -e {forked_pid} ]; do sleep 0.01; done"
    return f"{setsid_daemon} {double_fork}; {wait}", [setsid_pid, forked_pid]


async def _pids_when_written(paths: list[Path]) -> list[int]:
    await wait_for_os_fact(lambda: all(path.exists() for path in paths), f"the command writing {paths}")
    return [int(path.read_text()) for path in paths]


def _exec_command(cmd: str, **args: Any) -> str:
    return f"tools.exec_command({json.dumps({'cmd': cmd, 'login': False, **args})})"


async def _exec_round(conn: FakeConnection, response_id: str, call_id: str, source: str) -> str:
    await conn.send_tool_call(response_id, call_id, "exec", source)
    output = (await conn.next_request())["input"][0]["output"]
    return output if isinstance(output, str) else "".join(part.get("text", "") for part in output)


async def test_cancelling_a_turn_kills_the_daemons_of_its_command(
    server: FakeResponsesServer, workspace: Path
) -> None:
    spawn, pid_files = _daemons(workspace)
    shell_pid = workspace / "shell.pid"
    source = f"await {_exec_command(f'{spawn}; {_publish(shell_pid)}; sleep 300', yield_time_ms=30000)};"
    running = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-1", [frames.custom_tool_call("call-1", "exec", source)])
        await _pids_when_written([*pid_files, shell_pid])
        running.set()
        second = await server.accept()
        await second.next_request()
        await second.send_final("resp-2")

    async with scripted(script, 20):
        async with ta.open_agent(make_config(server, workspace, sandbox=HOST_PIDS)) as agent:
            turn = await agent.prompt("start daemons")
            await running.wait()
            pids = await _pids_when_written([*pid_files, shell_pid])
            assert all(pid_alive(pid) for pid in pids)
            await turn.cancel()
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
            await wait_gone(pids)
            await wait_no_processes_in(workspace)
            await (await agent.prompt("next")).result()


async def test_leaving_the_agent_kills_the_daemons_of_a_background_session(
    server: FakeResponsesServer, workspace: Path
) -> None:
    spawn, pid_files = _daemons(workspace)
    source = (
        f"const r = await {_exec_command(f'{spawn}; sleep 300', yield_time_ms=250)};"
        "text(`session ${r.session_id}`); yield_control(); await new Promise(() => {});"
    )
    pids: list[int] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec_round(conn, "resp-1", "call-1", source)
        assert "Script running with cell ID 1" in output
        assert "session 1" in output
        pids.extend(await _pids_when_written(pid_files))  # the daemons run before we leave
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        await run_model(server, workspace, "leave daemons running", sandbox=HOST_PIDS)
    assert len(pids) == 2
    await wait_gone(pids)
    await wait_no_processes_in(workspace)


async def test_daemons_left_by_a_finished_command_are_gone_when_its_result_arrives(
    server: FakeResponsesServer, workspace: Path
) -> None:
    spawn, pid_files = _daemons(workspace)
    source = f"const r = await {_exec_command(f'{spawn}; echo done')}; text(`${{r.exit_code}}:${{r.output}}`);"
    pids: list[int] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec_round(conn, "resp-1", "call-1", source)
        assert "0:done" in output
        pids.extend(int(path.read_text()) for path in pid_files)
        assert not any(pid_alive(pid) for pid in pids)  # reaped before the result was returned
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        output = await run_model(server, workspace, "start and finish", sandbox=HOST_PIDS)
    assert [r["status"] for r in events_of(output, "tool.result") if r["tool"] == "exec_command"] == ["completed"]
    assert len(pids) == 2
    await wait_no_processes_in(workspace)
