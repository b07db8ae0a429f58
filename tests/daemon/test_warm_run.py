"""``trio-agent run`` through the warm daemon: the same output and exit status as the
in-process path, Ctrl-C and SIGTERM forwarded, a vanished client cancelling only its
own run, and a thin client that imports neither trio nor trio_agent."""

from __future__ import annotations

import difflib
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from .._os_facts import pid_alive, processes_in, wait_for_os_fact, wait_gone
from ..cli._cli import COMMAND, ROOT, cli_env, open_cli, run_cli
from ._daemon import Daemon, normalised, running_daemon

LONG = "run: sleep 60 & touch started; wait"
STUBBORN = "run: trap 'touch got-term' TERM; sleep 60 & touch started; while :; do wait; done"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with running_daemon() as daemon:
        yield daemon


async def _started(workspace: Path) -> list[int]:
    await wait_for_os_fact((workspace / "started").exists, "the command starting (the turn is live)")
    pids = processes_in(workspace)
    assert pids
    return pids


@pytest.mark.parametrize("prompt", ["hello", "run: echo one; echo two >&2; exit 3"], ids=["answer", "tool"])
async def test_the_daemon_prints_what_the_in_process_run_prints(
    daemon: Daemon, tmp_path: Path, workspace: Path, prompt: str
) -> None:
    options = ("--local", "--workspace", str(workspace))
    spares = await daemon.prime(*options, cwd=tmp_path)
    warm = await run_cli("run", *options, prompt, cwd=tmp_path, env=daemon.env)
    await daemon.served(spares)
    local = await run_cli("run", *options, prompt, cwd=tmp_path, env=cli_env())  # TRIO_AGENT_NO_DAEMON=1
    assert warm.returncode == local.returncode
    for ours, theirs in ((warm.stdout, local.stdout), (warm.stderr, local.stderr)):
        diff = difflib.unified_diff(normalised(theirs).splitlines(), normalised(ours).splitlines(), lineterm="")
        assert normalised(ours) == normalised(theirs), "\n".join(diff)
    assert warm.returncode == 0 and "-- completed: " in warm.stderr.decode()  # progress: on stderr


async def test_json_lines_carry_the_same_events(daemon: Daemon, tmp_path: Path) -> None:
    # The same events, but for the worker's warmup: it warmed up before the prompt
    # arrived (those events come before run.started, as they happened), while the
    # in-process run, its prompt in hand, sends none (open_agent(warmup=False)).
    spares = await daemon.prime("--local", "--jsonl", cwd=tmp_path)
    warm = await run_cli("run", "--local", "--jsonl", "hello", cwd=tmp_path, env=daemon.env)
    await daemon.served(spares)
    local = await run_cli("run", "--local", "--jsonl", "hello", cwd=tmp_path)
    assert warm.returncode == local.returncode == 0
    assert normalised(warm.stderr) == normalised(local.stderr)  # each its own session

    def kinds(output: bytes, warmup: bool) -> list[str]:
        events = [json.loads(line) for line in output.decode().splitlines()]
        return sorted(e["type"] for e in events
                      if warmup == (e["type"].startswith("model.warmup.") or e["payload"].get("phase") == "warmup"))

    assert kinds(warm.stdout, warmup=False) == kinds(local.stdout, warmup=False)
    assert kinds(local.stdout, warmup=True) == []
    assert "model.warmup.completed" in kinds(warm.stdout, warmup=True)
    assert json.loads(warm.stdout.decode().splitlines()[-1])["payload"]["status"] == "completed"


async def test_an_option_error_is_the_same_error(daemon: Daemon, tmp_path: Path) -> None:
    # The daemon's worker cannot start with this option: the client runs in-process and
    # the key is remembered as failing, so the second run does not wait for a worker.
    for _ in range(2):
        warm = await run_cli("run", "--local", "--max-attempts", "0", "hi", cwd=tmp_path, env=daemon.env)
        local = await run_cli("run", "--local", "--max-attempts", "0", "hi", cwd=tmp_path)
        assert (warm.returncode, warm.stdout, warm.stderr) == (local.returncode, local.stdout, local.stderr)
        assert warm.returncode == 2 and b"--max-attempts" in warm.stderr
    log = Path(daemon.directory, "daemon.log").read_text()
    assert "argument --max-attempts: expected a whole number of attempts >= 1" in log  # the worker's own words


async def test_the_thin_client_imports_neither_trio_nor_trio_agent(daemon: Daemon, tmp_path: Path) -> None:
    spares = await daemon.prime("--local", cwd=tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import _trio_agent_launch as launch\n"
            "code = launch.main(['run', '--local', 'hello'])\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'trio_agent', 'attrs'))\n"
            "print('loaded:', loaded, file=sys.stderr); sys.exit(code)")
    with trio.fail_after(60):
        done = await trio.run_process([sys.executable, "-c", code, str(ROOT)], cwd=tmp_path, env=daemon.env,
                                      capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert "loaded: []" in done.stderr.decode()
    assert "Hello from trio_agent's local scripted model" in done.stdout.decode()
    await daemon.served(spares)


@pytest.mark.parametrize(("signum", "code", "name"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
async def test_a_signal_cancels_the_turn_in_the_daemon(
    daemon: Daemon, tmp_path: Path, workspace: Path, signum: int, code: int, name: str
) -> None:
    spares = await daemon.prime("--local", "--workspace", str(workspace), cwd=tmp_path)
    async with open_cli("run", "--local", "--workspace", str(workspace), LONG, cwd=tmp_path,
                        env=daemon.env) as cli:
        pids = await _started(workspace)
        cli.signal(signum)
        assert await cli.wait() == code
    spare = await daemon.served(spares)
    assert not any(pid_alive(pid) for pid in pids), "the command ended before the client exited"
    err = cli.stderr.splitlines()  # progress and the one line: on stderr
    assert err[-1].startswith(f"-- cancelled by {name} after ")
    assert [line for line in err if line.startswith("-- cancelled")] == [err[-1]]
    assert "[tool] exec_command -> cancelled in " in cli.stderr
    assert cli.stdout == ""
    assert "Traceback" not in cli.stdout + cli.stderr
    await wait_gone([spare])


async def test_a_second_ctrl_c_exits_at_once(daemon: Daemon, tmp_path: Path, workspace: Path) -> None:
    spares = await daemon.prime("--local", "--workspace", str(workspace), cwd=tmp_path)
    async with open_cli("run", "--local", "--workspace", str(workspace), STUBBORN, cwd=tmp_path,
                        env=daemon.env) as cli:
        pids = await _started(workspace)
        cli.signal(signal.SIGINT)
        await wait_for_os_fact((workspace / "got-term").exists, "the command getting SIGTERM")
        cli.signal(signal.SIGINT)
        assert await cli.wait() == 130
    spare = await daemon.served(spares)
    assert "trio-agent: Ctrl-C again: exiting now, without waiting for cleanup" in cli.stderr
    assert not any(line.startswith("-- cancelled") for line in cli.stderr.splitlines())
    await wait_gone([spare, *pids])


async def test_a_vanished_client_cancels_its_run_and_not_the_daemon(
    daemon: Daemon, tmp_path: Path, workspace: Path
) -> None:
    spares = await daemon.prime("--local", "--workspace", str(workspace), cwd=tmp_path)
    async with open_cli("run", "--local", "--workspace", str(workspace), LONG, cwd=tmp_path,
                        env=daemon.env) as cli:
        pids = await _started(workspace)
        cli.process.kill()
        assert await cli.wait() == -signal.SIGKILL
    (spare,) = spares - await daemon.settle()  # the spare that took the run has gone; another replaced it
    await wait_gone([spare, *pids])  # the worker cancelled the turn (its command killed) and exited
    status = daemon.status()
    assert status is not None and status.pid == daemon.pid
    again = await run_cli("run", "--local", "hello", cwd=tmp_path, env=daemon.env)
    assert again.returncode == 0, again.stderr.decode()


async def _on_terminal(args: list[str], cwd: Path, env: dict[str, str], columns: int) -> tuple[int, str]:
    """Run the command with a terminal of ``columns`` columns as stdout and stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    try:
        process = await trio.lowlevel.open_process([*COMMAND, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                                   stdout=slave, stderr=slave)
    finally:
        os.close(slave)
    output = b""
    stream = trio.lowlevel.FdStream(master)
    with trio.fail_after(60):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:  # EIO: every holder of the terminal's other end closed it
                break
            if not data:
                break
            output += data
        code = await process.wait()
    await stream.aclose()
    return code, output.decode()


async def test_the_worker_writes_to_the_clients_terminal_at_its_width(
    daemon: Daemon, tmp_path: Path, workspace: Path
) -> None:
    options = ["--local", "--workspace", str(workspace)]
    spares = await daemon.prime(*options, cwd=tmp_path)
    prompt = "run: printf '%080d\\n' 0"
    warm = await _on_terminal(["run", *options, prompt], tmp_path, daemon.env, 50)
    await daemon.served(spares)
    local = await _on_terminal(["run", *options, prompt], tmp_path, cli_env(), 50)
    assert warm[0] == local[0] == 0
    assert normalised(warm[1].encode()) == normalised(local[1].encode())
    cut = [line for line in warm[1].splitlines() if line.startswith("  | 0")]
    assert cut == ["  | " + "0" * 43 + "..."]  # the terminal's 50 columns, not 200 for a pipe
