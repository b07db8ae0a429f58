"""The MCP server supervisor (``_server_reaper.py``) as a program: what the SDK sees of
it is what it would see of the server -- its stdio, its exit status -- and its tree ends
with the server, a daemon that ignores SIGTERM included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trio_agent._tools._mcp_process import SERVER_GRACE, server_command

from .._os_facts import pid_alive

REAPER = Path(__file__).resolve().parents[2] / "trio_agent" / "_tools" / "_server_reaper.py"
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="subreapers are Linux's")


def supervise(*argv: str, input: bytes = b"", grace: float = SERVER_GRACE) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), str(grace), *argv],
                          input=input, capture_output=True, timeout=30)


def test_the_server_gets_the_stdio_and_its_exit_status_is_the_supervisors() -> None:
    done = supervise("/bin/sh", "--", "sh", "-c", "read line; echo \"got $line\"; echo oops >&2; exit 3",
                     input=b"hello\n")
    assert (done.returncode, done.stdout, done.stderr) == (3, b"got hello\n", b"oops\n")
    killed = supervise("/bin/sh", "--", "sh", "-c", "kill -KILL $$")
    assert killed.returncode == 128 + signal.SIGKILL
    named = supervise("/bin/sh", "--", "custom-argv0", "-c", "echo $0")
    assert named.stdout == b"custom-argv0\n"  # argv[0] as the agent gave it, the path run


def test_a_stubborn_daemon_of_the_server_is_killed_after_the_grace(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    daemon = f'trap "" TERM; echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; exec sleep 60'
    done = supervise("/bin/sh", "--", "sh", "-c", f"setsid sh -c '{daemon}' </dev/null >/dev/null 2>&1 & "
                     f"while [ ! -e {pid_file} ]; do sleep 0.01; done; grep SigIgn /proc/$(cat {pid_file})/status",
                     grace=0.2)
    assert done.returncode == 0
    ignored = int(done.stdout.split()[1], 16)
    assert ignored & (1 << (signal.SIGTERM - 1))  # the daemon (sleep, by then) ignores SIGTERM
    assert not pid_alive(int(pid_file.read_text()))  # gone when the supervisor exited: KILLed after the grace


def test_a_command_that_cannot_run_is_127_with_the_reason_on_stderr(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    done = supervise(str(script), "--", "x")
    assert done.returncode == 127 and b"cannot start the MCP server" in done.stderr
    assert b"Permission denied" in done.stderr
    assert supervise("nonsense").returncode == 2  # not the agent's command line: usage


def test_the_agent_resolves_the_command_as_subprocess_would(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "my-server"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    command, args = server_command("my-server", ["--flag"], {"PATH": str(tmp_path / "bin")}, tmp_path)
    assert command == sys.executable and args[-4:] == [str(tool), "--", "my-server", "--flag"]
    _, relative = server_command("bin/my-server", [], {"PATH": ""}, tmp_path)
    assert relative[-3] == str(tool)
    with pytest.raises(FileNotFoundError, match="No such file or directory: 'no-such-server'"):
        server_command("no-such-server", [], {"PATH": str(tmp_path / "bin")}, tmp_path)
    tool.chmod(0o644)
    with pytest.raises(PermissionError):
        server_command("my-server", [], {"PATH": str(tmp_path / "bin")}, tmp_path)
