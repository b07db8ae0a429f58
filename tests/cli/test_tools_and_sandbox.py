"""The tool, sandbox and approval options of ``trio-agent run``, run as the console
script: a real MCP server over stdio built from ``--mcp-stdio``/``--mcp-arg``, real
sandboxed writes, approvals answered on a real pseudo-terminal, and the usage errors."""

from __future__ import annotations

import json
import os
import pty
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from trio_agent.testing import FakeResponsesServer

from .._os_facts import pid_alive
from ..acceptance.test_sandbox import outside as outside  # the fixture: outside the workspace and /tmp
from ..conftest import scripted
from ._cli import cli_env, open_cli, run_cli

SERVER = Path(__file__).parent.parent / "fixtures" / "mcp_server.py"


async def test_an_mcp_stdio_server_with_its_args_is_callable_and_gone_after_the_run(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "mcp.pid"
    seen: dict[str, object] = {}

    async def model() -> None:
        conn = await server.accept()
        seen["first"] = await conn.next_request()  # the prompt (no warmup): it carries the tool definitions
        source = ('await tools.tool_search({query: "add two integers"});\n'
                  "const r = await tools.mcp__calc__add({a: 2, b: 3});\ntext(JSON.stringify(r.structuredContent));")
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        seen["output"] = (await conn.next_request())["input"][0]["output"]
        await conn.send_final("resp-2", "it is 5")

    command = shlex.join([sys.executable, str(SERVER)])
    async with scripted(model, 60):
        result = await run_cli("run", "--websocket-url", server.url, "--mcp-stdio", f"calc={command}",
                               "--mcp-arg=--pid-file", "--mcp-arg", str(pid_file), "--no-web-search",
                               "--workspace", str(workspace), "add them", cwd=tmp_path,
                               env=cli_env(OPENAI_API_KEY="sk-cli-dummy"))
    assert result.returncode == 0, result.stderr.decode()
    assert '{"result":5}' in json.dumps(seen["output"]).replace("\\", "").replace(" ", "")
    assert "[mcp] calc ready: 7 tool(s)" in result.stderr.decode()  # progress: on stderr
    assert result.stdout.decode() == "it is 5\n"
    assert not pid_alive(int(pid_file.read_text())), "the MCP server ended with the agent"
    prefix = json.dumps(seen["first"])  # the tool definitions and exec's description
    assert "tool_search" in prefix and "Web search (`web__run`) is turned off for this agent" in prefix


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--mcp-arg", "x"], "--mcp-arg 'x' adds an argument to the command of an earlier --mcp-stdio"),
        (["--mcp", "docs"], "--mcp takes NAME=URL"),
        (["--mcp-stdio", "git="], "--mcp-stdio takes NAME=COMMAND"),
        (["--mcp-stdio", "git=uvx 'mcp-server-git"], "cannot be split like a shell line"),
        (["--mcp", "a b=https://example.com/mcp"], "MCP server name 'a b' is invalid"),
        (["--mcp", "docs=https://a.example/mcp", "--mcp", "docs=https://b.example/mcp"], "is added twice"),
        (["--mcp", "docs=example.com"], "needs an http:// or https:// URL"),
        (["--sandbox", "danger-full-access", "--network"], "--network sets up the sandbox"),
        (["--sandbox", "read-only", "--writable-git"], "--writable-git makes something writable"),
        (["--writable-root", "/no/such/dir"], "'/no/such/dir' is not an existing directory"),
        (["--ask-for-approval", "on-request"], "stdin is not a terminal; run trio-agent in a terminal"),
    ],
)
async def test_bad_tool_and_sandbox_options_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    result = await run_cli("run", *args, "hi", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().startswith("usage: trio-agent run ")
    assert says in result.stderr.decode(), result.stderr.decode()


async def test_read_only_refuses_the_write(tmp_path: Path, workspace: Path) -> None:
    result = await run_cli("run", "--sandbox", "read-only", "--workspace", str(workspace), "run: touch made",
                           cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert not (workspace / "made").exists()
    assert "Read-only file system" in result.stdout.decode()  # in the answer, which quotes the output


async def test_a_writable_root_is_writable_and_nothing_else_outside(
    tmp_path: Path, workspace: Path, outside: Path
) -> None:
    other = Path(tempfile.mkdtemp(prefix="trio-agent-cli-other-", dir="/var/tmp"))
    try:
        prompt = f"run: touch {outside}/made; touch {other}/made"
        result = await run_cli("run", "--writable-root", str(outside), "--workspace", str(workspace), prompt,
                               cwd=tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        assert (outside / "made").exists()
        assert not (other / "made").exists()
    finally:
        shutil.rmtree(other, ignore_errors=True)


@pytest.mark.parametrize(
    ("answer", "made", "says"),
    [(b"y\n", True, "trio-agent: approved"), (b"\n", False, "trio-agent: denied"),
     (b"a\n", True, "trio-agent: approved for this session")],
)
async def test_approvals_are_asked_on_the_terminal(
    tmp_path: Path, workspace: Path, answer: bytes, made: bool, says: str
) -> None:
    terminal, user = pty.openpty()
    try:
        os.write(terminal, answer)  # typed ahead: read when the question is asked
        async with open_cli("run", "--ask-for-approval", "untrusted", "--workspace", str(workspace),
                            "run: touch made", cwd=tmp_path, stdin=user) as cli:
            os.close(user)
            user = -1
        assert cli.process.returncode == 0, cli.stderr
    finally:
        os.close(terminal)
        if user >= 0:
            os.close(user)
    assert (workspace / "made").exists() is made
    err = cli.stderr.splitlines()  # the question between the progress lines
    asked = err.index(f"trio-agent: approve? run `touch made` in {workspace.resolve()}")
    assert err[asked + 1].startswith("  why: ")
    assert err[asked + 2] == "  [y]es, [N]o, [a]lways (this session), abort (the turn): " + says
    if not made:
        assert "denied" in cli.stdout


async def test_abort_cancels_the_turn(tmp_path: Path, workspace: Path) -> None:
    terminal, user = pty.openpty()
    try:
        os.write(terminal, b"abort\n")
        result = await run_cli("run", "--ask-for-approval", "untrusted", "--workspace", str(workspace),
                               "run: touch made", cwd=tmp_path, stdin=user)
    finally:
        os.close(terminal)
        os.close(user)
    assert result.returncode == 1
    assert not (workspace / "made").exists()
    assert "trio-agent: denied; the turn is cancelled" in result.stderr.decode()
    assert "-- cancelled: " in result.stderr.decode()
    assert result.stdout == b""  # no answer
