"""The sandbox through a live agent: the default, what the model is told, detection at
``open_agent``, and what a command can reach (real processes, real writes)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer

from .._os_facts import wait_no_processes_in
from ..conftest import EventLog, make_config, scripted, warm


def exec_command(cmd: str, **args: Any) -> str:
    """JS calling ``tools.exec_command`` and printing ``exit_code:output``, or the error."""
    call = json.dumps({"cmd": cmd, "login": False, **args})
    return (f"try {{ const r = await tools.exec_command({call}); text(`${{r.exit_code}}:${{r.output}}`); }} "
            "catch (e) { text(`error: ${e.message}`); }")


def text_of(output: Any) -> str:
    """What the script printed with ``text()`` (the cell's status header left out)."""
    return output if isinstance(output, str) else "".join(part.get("text", "") for part in output[1:])


@pytest.fixture
def outside() -> Iterator[Path]:
    """A writable directory of the host outside the workspace and outside /tmp (which a
    ``workspace-write`` sandbox replaces by its private temp dir)."""
    path = Path(tempfile.mkdtemp(prefix="trio-agent-outside-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def exec_once(conn: FakeConnection, source: str) -> str:
    await conn.send_tool_call("resp-1", "call-1", "exec", source)
    return text_of((await conn.next_request())["input"][0]["output"])


async def one_exec(
    server: FakeResponsesServer, workspace: Path, source: str, **config: Any
) -> tuple[str, list[dict[str, Any]], EventLog, ta.SandboxMode]:
    """One turn running ``source`` in ``exec``: its output, every request, the events, the mode."""
    seen: dict[str, str] = {}

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        seen["output"] = await exec_once(conn, source)
        await conn.send_final("resp-2")

    log = EventLog()
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(make_config(server, workspace, **config)) as agent:
            nursery.start_soon(log.consume, agent.events)
            mode = agent.sandbox
            await (await agent.prompt("go")).result()
    await wait_no_processes_in(workspace)
    return seen["output"], server.requests, log, mode


def permissions_text(requests: list[dict[str, Any]]) -> str:
    first_turn = next(r for r in requests if r.get("generate", True) is not False)
    return next(
        str(item["content"][0]["text"]) for item in first_turn["input"]
        if item.get("role") == "developer" and "<permissions instructions>" in json.dumps(item)
    )


async def test_the_default_is_workspace_write_without_network_and_the_model_is_told(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    target = outside / "outside.txt"
    source = exec_command(f"echo in > inside.txt && cat inside.txt; echo out > {target}; echo $?")
    output, requests, log, mode = await one_exec(server, workspace, source)
    assert mode is ta.SandboxMode.WORKSPACE_WRITE
    assert output.startswith("0:in\n") and "Read-only file system" in output and output.endswith("\n1\n")
    assert (workspace / "inside.txt").read_text() == "in\n"
    assert not target.exists()
    text = permissions_text(requests)
    assert "`sandbox_mode` is `workspace-write`" in text and "Network access is disabled" in text
    assert "Approval policy is `never`" in text
    assert "sandbox.unavailable" not in log.kinds()


async def test_read_only_refuses_writes_and_says_so_to_the_model(server: FakeResponsesServer, workspace: Path) -> None:
    source = exec_command("echo x > file.txt")
    output, requests, _, mode = await one_exec(server, workspace, source, sandbox=ta.SandboxMode.READ_ONLY)
    assert mode is ta.SandboxMode.READ_ONLY
    assert output.startswith("1:") and "Read-only file system" in output
    assert os.listdir(workspace) == []
    assert "`sandbox_mode` is `read-only`" in permissions_text(requests)


async def test_the_agents_environ_is_not_readable_from_a_command(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIO_AGENT_TEST_MARKER", "only-the-agent-has-this")
    output, _, _, _ = await one_exec(server, workspace, exec_command(f"cat /proc/{os.getpid()}/environ"))
    assert "only-the-agent-has-this" not in output
    assert output.startswith("1:") and "No such file or directory" in output


async def test_the_network_setting_reaches_the_permissions_message(
    server: FakeResponsesServer, workspace: Path
) -> None:
    _, requests, _, _ = await one_exec(server, workspace, "text(1)", sandbox=ta.Sandbox(network=True))
    assert "Network access is enabled" in permissions_text(requests)


async def test_a_configured_mode_that_cannot_work_fails_open_agent(
    server: FakeResponsesServer, workspace: Path
) -> None:
    config = make_config(server, workspace, sandbox=ta.Sandbox(bwrap="/nonexistent/bwrap"))
    with pytest.raises(ta.SandboxUnavailable) as info:
        async with ta.open_agent(config):
            pytest.fail("open_agent must not start with a sandbox that cannot work")
    assert "sandbox=ta.SandboxMode.DANGER_FULL_ACCESS" in str(info.value)
    assert server.requests == []  # nothing was sent


async def test_danger_full_access_runs_unconfined(server: FakeResponsesServer, workspace: Path, outside: Path) -> None:
    target = outside / "outside.txt"
    output, requests, _, mode = await one_exec(
        server, workspace, exec_command(f"echo out > {target}"), sandbox=ta.SandboxMode.DANGER_FULL_ACCESS
    )
    assert mode is ta.SandboxMode.DANGER_FULL_ACCESS and output == "0:"
    assert target.read_text() == "out\n"
    assert "`sandbox_mode` is `danger-full-access`" in permissions_text(requests)


async def test_without_bwrap_the_default_runs_unconfined_and_says_so(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}")  # no bwrap to be found
    with pytest.warns(RuntimeWarning, match=r"without a sandbox \(danger-full-access\).*Bubblewrap is not installed"):
        output, requests, log, mode = await one_exec(server, workspace, exec_command("echo hi"))
    assert mode is ta.SandboxMode.DANGER_FULL_ACCESS and output == "0:hi\n"
    [event] = log.payloads("sandbox.unavailable")
    assert event["mode"] == "danger-full-access" and "apt-get install bubblewrap" in event["reason"]
    assert log.kinds()[0] == "sandbox.unavailable"  # before anything else the agent does
    assert "`sandbox_mode` is `danger-full-access`" in permissions_text(requests)
