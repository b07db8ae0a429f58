"""Code mode through the whole runtime: exec over the real WebSocket path, real processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

from .._os_facts import wait_for_os_fact, wait_gone, wait_no_processes_in
from ..conftest import events_of, make_config, run_model, scripted, warm

# These tests read processes' pids with `$$`, which are host pids only outside a sandbox's
# PID namespace: they pin the unsandboxed (subreaper) path; tests/acceptance/test_sandbox_lifetime.py
# covers the sandboxed one.
HOST_PIDS = ta.SandboxMode.DANGER_FULL_ACCESS


async def _exec_round(conn: FakeConnection, response_id: str, call_id: str, source: str) -> dict[str, Any]:
    await conn.send_tool_call(response_id, call_id, "exec", source)
    request = await conn.next_request()
    return request["input"][0]


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "".join(part.get("text", "") for part in output)


async def test_runaway_loop_is_terminated_and_the_next_exec_works(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        runaway = 'text("start"); await tools.exec_command({cmd: "true"}); while (true) {}'
        first = await _exec_round(conn, "resp-1", "call-1", runaway)
        assert _text(first["output"]).startswith("Script terminated")
        assert first["output"][1] == {"type": "input_text", "text": "start"}
        second = await _exec_round(conn, "resp-2", "call-2", 'text(1 + 1);')
        assert _text(second["output"]).startswith("Script completed")
        assert second["output"][1:] == [{"type": "input_text", "text": "2"}]
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        output = await run_model(server, workspace, "loop forever")
    statuses = [r["status"] for r in events_of(output, "tool.result") if r["tool"] == "exec"]
    assert statuses == ["failed", "completed"]


async def test_promise_all_runs_three_commands_concurrently(server: FakeResponsesServer, workspace: Path) -> None:
    source = (
        "const started = Date.now();\n"
        "const results = await Promise.all([1, 2, 3].map(n => "
        "tools.exec_command({cmd: `sleep 0.6; echo done-${n}`, login: false})));\n"
        "text(results.map(r => r.output.trim()).join(','));"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec_round(conn, "resp-1", "call-1", source)
        assert "done-1,done-2,done-3" in _text(output["output"])
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        output = await run_model(server, workspace, "in parallel")
    (exec_result,) = [r for r in events_of(output, "tool.result") if r["tool"] == "exec"]
    # Three 0.6 s commands in sequence would take 1.8 s.
    assert exec_result["duration_ns"] < 1.5e9
    nested = [r for r in events_of(output, "tool.result") if r["tool"] == "exec_command"]
    assert sorted(r["call_id"] for r in nested) == ["call-1/code-1", "call-1/code-2", "call-1/code-3"]
    (completed,) = events_of(output, "run.completed")
    assert completed["tool_calls"] == 4


async def test_script_exceptions_report_name_message_and_stack(server: FakeResponsesServer, workspace: Path) -> None:
    source = 'text("before");\nfunction explode() { throw new TypeError("bad thing"); }\nexplode();'

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec_round(conn, "resp-1", "call-1", source)
        text = _text(output["output"])
        assert text.startswith("Script failed")
        assert "before" in text
        assert "Script error:\nTypeError: bad thing" in text
        assert "explode" in text
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        await run_model(server, workspace, "throw")


async def test_long_output_is_truncated_with_the_reference_notice(server: FakeResponsesServer, workspace: Path) -> None:
    source = (
        '// @exec: {"max_output_tokens": 100}\n'
        'text(Array.from({length: 2000}, (_, i) => `line ${i}`).join("\\n"));'
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec_round(conn, "resp-1", "call-1", source)
        text = _text(output["output"])
        assert "Warning: truncated output (original token count: 4723)\nTotal output lines: 2000\n" in text
        assert "line 0" in text and "line 1999" in text
        assert len(text) < 2000
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        await run_model(server, workspace, "be verbose")


async def test_apply_patch_through_exec_edits_files_and_refuses_escapes(
    server: FakeResponsesServer, workspace: Path
) -> None:
    (workspace / "old.txt").write_text("remove me\n")
    (workspace / "code.py").write_text("def f():\n    return 1\n")
    patch = (
        "*** Begin Patch\n"
        "*** Add File: new/hello.txt\n+hello\n"
        "*** Delete File: old.txt\n"
        "*** Update File: code.py\n*** Move to: lib/code.py\n@@ def f():\n-    return 1\n+    return 2\n"
        "*** End Patch"
    )
    escape = "*** Begin Patch\n*** Add File: ../outside.txt\n+nope\n*** End Patch"
    source = (
        f"text(await tools.apply_patch({json.dumps(patch)}));\n"
        f"try {{ await tools.apply_patch({json.dumps(escape)}); }} catch (e) {{ text('refused: ' + e.message); }}"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec_round(conn, "resp-1", "call-1", source)
        text = _text(output["output"])
        assert "Success. Updated the following files:\nA new/hello.txt\nM lib/code.py\nD old.txt" in text
        assert "refused: Refusing path '../outside.txt'" in text
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        await run_model(server, workspace, "patch")
    assert (workspace / "new" / "hello.txt").read_text() == "hello\n"
    assert not (workspace / "old.txt").exists()
    assert (workspace / "lib" / "code.py").read_text() == "def f():\n    return 2\n"
    assert not (workspace.parent / "outside.txt").exists()


async def test_cancelling_a_turn_kills_the_whole_command_tree(server: FakeResponsesServer, workspace: Path) -> None:
    pid_file = workspace / "pids"
    source = (
        "await tools.exec_command({cmd: "
        f"'sleep 300 & echo $! > {pid_file}; echo $$ >> {pid_file}; wait', login: false, yield_time_ms: 30000}});"
    )
    running = trio.Event()
    replay: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-1", [frames.custom_tool_call("call-1", "exec", source)])
        await wait_for_os_fact(
            lambda: pid_file.exists() and len(pid_file.read_text().split()) == 2, "the command's pid file"
        )
        running.set()
        second = await server.accept()
        replay.append(await second.next_request())
        await second.send_final("resp-2")

    async with scripted(script, 20):
        async with ta.open_agent(make_config(server, workspace, sandbox=HOST_PIDS)) as agent:
            turn = await agent.prompt("start a long command")
            await running.wait()
            await turn.cancel()
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
            pids = [int(p) for p in pid_file.read_text().split()]
            await wait_gone(pids)
            await wait_no_processes_in(workspace)
            await (await agent.prompt("next")).result()
    items = replay[0]["input"]
    assert "previous_response_id" not in replay[0]
    call_output = next(item for item in items if item.get("type") == "custom_tool_call_output")
    assert call_output["output"].endswith("aborted by user")
    assert "<turn_aborted>" in json.dumps(items[-2])
    assert items[-1]["content"][0]["text"] == "next"


async def test_leaving_the_agent_stops_a_yielded_cell_and_its_processes(
    server: FakeResponsesServer, workspace: Path
) -> None:
    pid_file = workspace / "pid"
    source = (
        f"await tools.exec_command({{cmd: 'echo $$ > {pid_file}; sleep 300', login: false, yield_time_ms: 250}});"
        "text('started'); yield_control(); await new Promise(() => {});"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec_round(conn, "resp-1", "call-1", source)
        assert "Script running with cell ID 1" in _text(output["output"])
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        await run_model(server, workspace, "leave it running", sandbox=HOST_PIDS)
    await wait_gone([int(pid_file.read_text())])
    await wait_no_processes_in(workspace)


async def test_finished_cells_leave_no_bookkeeping_behind(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        for index in range(3):
            await _exec_round(conn, f"resp-{index}", f"call-{index}", f"text({index})")
        late = "yield_control(); await new Promise(r => setTimeout(r, 10)); text('late')"
        yielded = await _exec_round(conn, "resp-y", "call-y", late)
        assert "Script running with cell ID 4" in _text(yielded["output"])
        await conn.send_tool_call("resp-w", "call-w", "wait", {"cell_id": "4", "yield_time_ms": 5000})
        waited = await conn.next_request()
        assert "late" in _text(waited["input"][0]["output"])
        await conn.send_final("resp-final")

    async with scripted(script, 20):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            await (await agent.prompt("cells")).result()
            dispatcher = agent._tools
            assert dispatcher._origins == {} and dispatcher._cell_calls == {}
