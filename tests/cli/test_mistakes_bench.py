"""``trio-agent bench`` with bad values and under Ctrl-C (issue 24), driving the installed
console script: one ``error:`` line naming the option and what it allows, exit 2; Ctrl-C
(sent to the process group, as a terminal sends it) exits 130 with one line, no
traceback from the benchmark or its server's child process, and no child left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from .._os_facts import pid_alive, wait_for_os_fact, wait_gone
from ._cli import SCRIPT, cli_env, open_cli, run_cli


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--runs", "0"], "argument --runs: expected a whole number >= 1, got '0'"),
        (["--runs", "-3"], "argument --runs: expected a whole number >= 1, got '-3'"),
        (["--runs", "many"], "argument --runs: expected a whole number >= 1, got 'many'"),
        (["--delay-ms", "-5"], "argument --delay-ms: expected a number of milliseconds >= 0, got '-5'"),
        (["--think-ms", "nan"], "argument --think-ms: expected a number of milliseconds >= 0, got 'nan'"),
        (["--deltas", "0"],
         "argument --deltas: expected a whole number >= 1 (the first token is the first delta), got '0'"),
    ],
)  # fmt: skip
async def test_a_bad_value_is_one_error_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    result = await run_cli("bench", *args, cwd=tmp_path, command=SCRIPT)
    assert result.returncode == 2
    assert result.stdout == b""
    err = result.stderr.decode()
    assert err.startswith("usage: trio-agent bench ")
    assert [line for line in err.splitlines() if "error" in line] == [f"trio-agent bench: error: {says}"]
    assert "Traceback" not in err


async def test_the_smallest_good_values_run(tmp_path: Path) -> None:
    result = await run_cli("bench", "--runs", "1", "--delay-ms", "0", "--think-ms", "0", "--deltas", "1", "--json",
                           cwd=tmp_path, command=SCRIPT, seconds=120)
    assert result.returncode == 0, result.stderr.decode()
    assert '"path": "bare_socket_floor"' in result.stdout.decode()
    assert result.stderr == b""


def _servers(pid: int) -> list[int]:
    """The scripted server's child processes of ``pid`` (not, say, a helper an import ran)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])  # the field after the state
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if parent == pid and b"trio_agent.cli._bench" in command and b"--serve" in command:
            found.append(int(entry))
    return found


async def test_ctrl_c_in_bench_exits_130_with_one_line_and_leaves_no_child(tmp_path: Path) -> None:
    # Its own process group, as a shell's foreground job: the "terminal" signals the group.
    args = ["bench", "--runs", "100000", "--delay-ms", "0", "--think-ms", "0", "--deltas", "1"]
    async with open_cli(*args, cwd=tmp_path, env=cli_env(), command=SCRIPT, start_new_session=True) as cli:
        pid = cli.process.pid
        await wait_for_os_fact(lambda: bool(_servers(pid)), "the benchmark starting its server's child process")
        children = _servers(pid)
        os.killpg(pid, signal.SIGINT)
        assert await cli.wait() == 130
    await wait_gone(children)
    assert not any(pid_alive(child) for child in children)
    assert cli.stdout == ""
    assert re.fullmatch(r"-- cancelled by Ctrl-C: the benchmark, after \d+\.\d s\n", cli.stderr), cli.stderr


async def test_sigterm_in_bench_exits_143_and_its_server_is_outside_its_group(tmp_path: Path) -> None:
    """The server's child process is not in the benchmark's process group (a terminal's
    Ctrl-C reaches only the benchmark, which ends the child itself)."""
    async with open_cli("bench", "--runs", "100000", "--delay-ms", "0", "--think-ms", "0", cwd=tmp_path,
                        command=SCRIPT, start_new_session=True, stdin=subprocess.DEVNULL) as cli:
        pid = cli.process.pid
        await wait_for_os_fact(lambda: bool(_servers(pid)), "the benchmark starting its server's child process")
        children = _servers(pid)
        assert all(os.getpgid(child) != os.getpgid(pid) for child in _servers(pid))
        cli.signal(signal.SIGTERM)
        assert await cli.wait() == 143
    await wait_gone(children)
    assert re.fullmatch(r"-- cancelled by SIGTERM: the benchmark, after \d+\.\d s\n", cli.stderr), cli.stderr
