"""Through a live agent with the default sandbox: daemons a command starts are gone when
its turn is cancelled and when the agent closes (found on the host by a unique ``sleep``
argument, asserted gone by pid), and ``write_stdin`` sessions keep working."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from .._os_facts import wait_gone, wait_no_processes_in
from ..conftest import make_config, run_model, scripted, warm
from ..tools.test_sandbox import host_pids, sandboxed_daemons, wait_running


def _exec_command(cmd: str, **args: Any) -> str:
    return f"tools.exec_command({json.dumps({'cmd': cmd, 'login': False, **args})})"


def _text(output: Any) -> str:
    return output if isinstance(output, str) else "".join(part.get("text", "") for part in output)


async def test_cancelling_a_turn_kills_the_sandboxed_daemons_of_its_command(
    server: FakeResponsesServer, workspace: Path
) -> None:
    spawn, arguments = sandboxed_daemons()
    source = f"await {_exec_command(f'{spawn} sleep 300', yield_time_ms=30000)};"
    pids: list[int] = []
    running = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-1", [frames.custom_tool_call("call-1", "exec", source)])
        pids.extend(await wait_running(arguments))
        running.set()
        second = await server.accept()
        await second.next_request()
        await second.send_final("resp-2")

    async with scripted(script, 20):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            assert agent.sandbox is ta.SandboxMode.WORKSPACE_WRITE
            turn = await agent.prompt("start daemons")
            await running.wait()
            await turn.cancel()
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
            await wait_gone(pids)
            await wait_no_processes_in(workspace)
            await (await agent.prompt("next")).result()
    assert len(pids) == 2 and all(host_pids(arg) == [] for arg in arguments)


async def test_closing_the_agent_kills_the_sandboxed_daemons_of_a_background_session(
    server: FakeResponsesServer, workspace: Path
) -> None:
    spawn, arguments = sandboxed_daemons()
    # A session that outlives its exec call, fed through write_stdin, then left running.
    command = f"{spawn} while read line; do echo got $line; done"
    source = (
        f"const r = await {_exec_command(command, yield_time_ms=250)};"
        "const w = await tools.write_stdin({session_id: r.session_id, chars: 'ping\\n', yield_time_ms: 2000});"
        "text(`session ${r.session_id}: ${w.output}`); yield_control(); await new Promise(() => {});"
    )
    pids: list[int] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        output = _text((await conn.next_request())["input"][0]["output"])
        assert "Script running with cell ID 1" in output
        assert "session 1: got ping" in output
        pids.extend(await wait_running(arguments))  # the daemons run before the agent closes
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        await run_model(server, workspace, "leave daemons running")
    assert len(pids) == 2
    await wait_gone(pids)
    await wait_no_processes_in(workspace)
