"""Through a live agent: more concurrent ``tools.exec_command`` calls than the 64-command
cap all succeed, at most 64 at a time (real processes)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from trio_agent.testing import FakeResponsesServer

from ..conftest import events_of, run_model, scripted, warm

COMMANDS = 200
CAP = 64
SLEEP = 0.5


def _peak(log: Path) -> int:
    live = peak = 0
    for word in log.read_text().split():
        live += 1 if word == "start" else -1
        peak = max(peak, live)
    return peak


async def test_promise_all_of_200_commands_all_succeed_64_at_a_time(
    server: FakeResponsesServer, workspace: Path
) -> None:
    log = workspace / "log"
    cmd = f"echo start >> {log}; sleep {SLEEP}; echo end >> {log}"
    source = (
        '// @exec: {"yield_time_ms": 30000}\n'
        f"const results = await Promise.all(Array.from({{length: {COMMANDS}}}, () => "
        f"tools.exec_command({json.dumps({'cmd': cmd, 'login': False})})));\n"
        "text(`codes=${JSON.stringify(results.map(r => r.exit_code ?? r.session_id ?? 'none'))}`);"
    )
    codes: list[object] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        output = (await conn.next_request())["input"][0]["output"]
        text = output if isinstance(output, str) else "".join(part.get("text", "") for part in output)
        match = re.search(r"codes=(\[.*?\])", text)
        assert match is not None, text
        codes.extend(json.loads(match[1]))
        await conn.send_final("resp-final")

    async with scripted(script, 30):
        output = await run_model(server, workspace, "run them all")
    assert codes == [0] * COMMANDS
    assert log.read_text().split().count("start") == COMMANDS
    assert 0 < _peak(log) <= CAP
    (exec_result,) = [r for r in events_of(output, "tool.result") if r["tool"] == "exec"]
    # Some slot ran at least ceil(200 / 64) = 4 commands one after another.
    assert exec_result["duration_ns"] >= -(-COMMANDS // CAP) * SLEEP * 1e9
    assert exec_result["duration_ns"] < 20e9
    nested = [r for r in events_of(output, "tool.result") if r["tool"] == "exec_command"]
    assert [r["status"] for r in nested] == ["completed"] * COMMANDS
