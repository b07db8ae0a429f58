"""Ctrl-C in ``trio-agent run`` and ``trio-agent replay``, sent to the console script
as a real SIGINT while the local model's turn runs a real command."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from .._os_facts import pid_alive, processes_in, wait_for_os_fact, wait_gone
from ..tracing.test_cli_otel import Collector
from ._cli import cli_env, open_cli, progress, run_cli

# Starts a long command, then says so with a marker file (its processes exist by then).
LONG = "run: sleep 60 & touch started; wait"
# The same, but it notes SIGTERM and ignores it, so its cleanup takes the kill grace.
STUBBORN = "run: trap 'touch got-term' TERM; sleep 60 & touch started; while :; do wait; done"


async def _started(workspace: Path) -> list[int]:
    await wait_for_os_fact((workspace / "started").exists, "the command starting (the turn is live)")
    pids = processes_in(workspace)
    assert pids, "the command's processes run in the workspace"
    return pids


@pytest.mark.parametrize("jsonl", [False, True], ids=["human", "jsonl"])
async def test_ctrl_c_kills_the_command_and_exits_130_with_one_line(
    tmp_path: Path, workspace: Path, jsonl: bool
) -> None:
    flags = ["--jsonl"] if jsonl else []
    async with open_cli("run", *flags, "--workspace", str(workspace), LONG, cwd=tmp_path) as cli:
        pids = await _started(workspace)
        cli.signal(signal.SIGINT)
        assert await cli.wait() == 130
    assert not any(pid_alive(pid) for pid in pids), "the command ended before the CLI exited"
    shown = cli.stderr  # in both modes: stdout carries only the answer (none here) or the events
    cancelled = [line for line in shown.splitlines() if line.startswith("-- cancelled")]
    assert len(cancelled) == 1, shown
    assert cancelled[0] == shown.splitlines()[-1]
    assert cancelled[0].startswith("-- cancelled by Ctrl-C after ")
    assert ": the turn, 1 model call(s), " in cancelled[0] and cancelled[0].endswith("; stopped exec_command")
    assert "Traceback" not in cli.stdout + cli.stderr
    if jsonl:
        assert '"status":"cancelled"' in cli.lines[-1]  # the turn's own run.failed still got out
    else:
        assert "[tool] exec_command -> cancelled in " in cli.stderr
        assert cli.stdout == ""


async def test_a_second_ctrl_c_during_cleanup_exits_at_once(tmp_path: Path, workspace: Path) -> None:
    async with open_cli("run", "--workspace", str(workspace), STUBBORN, cwd=tmp_path) as cli:
        pids = await _started(workspace)
        cli.signal(signal.SIGINT)
        # The turn's cancellation reached the command (SIGTERM, which it ignores): the
        # cleanup now waits out the kill grace, and a second Ctrl-C cuts it short.
        await wait_for_os_fact((workspace / "got-term").exists, "the command getting SIGTERM")
        cli.signal(signal.SIGINT)
        assert await cli.wait() == 130
    assert "trio-agent: Ctrl-C again: exiting now, without waiting for cleanup" in cli.stderr
    assert not any(line.startswith("-- cancelled") for line in cli.stderr.splitlines())  # it did not wait to say more
    assert "Traceback" not in cli.stdout + cli.stderr
    await wait_gone(pids)  # the supervisor kills what it left behind


async def test_sigterm_cancels_the_same_way_with_143(tmp_path: Path, workspace: Path) -> None:
    async with open_cli("run", "--workspace", str(workspace), LONG, cwd=tmp_path) as cli:
        pids = await _started(workspace)
        cli.signal(signal.SIGTERM)
        assert await cli.wait() == 143
    assert not any(pid_alive(pid) for pid in pids)
    assert cli.stderr.splitlines()[-1].startswith("-- cancelled by SIGTERM after ")


async def test_ctrl_c_during_a_replay_exits_130_with_one_line(tmp_path: Path, workspace: Path) -> None:
    recorded = await run_cli("run", "--record", "session.jsonl", "--workspace", str(workspace),
                             "run: touch started; sleep 1", cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stderr.decode()
    (workspace / "started").unlink()
    async with open_cli("replay", "session.jsonl", "--workspace", str(workspace), cwd=tmp_path) as cli:
        await wait_for_os_fact((workspace / "started").exists, "the replayed command starting")
        cli.signal(signal.SIGINT)
        assert await cli.wait() == 130
    assert cli.stderr.splitlines()[-1].startswith("-- cancelled by Ctrl-C: the replay, after ")  # a notice: stderr
    assert "Traceback" not in cli.stdout + cli.stderr


async def test_ctrl_c_with_otel_exits_130_and_still_flushes_the_spans(
    nursery: trio.Nursery, tmp_path: Path, workspace: Path
) -> None:
    collector = Collector()
    port = await nursery.start(collector.serve)
    env = cli_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    async with open_cli("run", "--otel", "--workspace", str(workspace), LONG, cwd=tmp_path, env=env) as cli:
        await _started(workspace)
        cli.signal(signal.SIGINT)
        assert await cli.wait() == 130
    assert cli.stderr.splitlines()[-1].startswith("-- cancelled by Ctrl-C after ")
    assert "Traceback" not in cli.stdout + cli.stderr
    turns = [attributes for name, attributes in collector.spans() if name == "invoke_agent /root"]
    assert turns == [{"service": "trio-agent", "status": "cancelled"}]


async def test_ctrl_c_while_otel_flushes_to_a_silent_collector_exits_at_once(tmp_path: Path) -> None:
    # A collector that never answers: the exporters would wait out their timeouts (60 s).
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    env = cli_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_EXPORTER_OTLP_TIMEOUT="60",
                  OTEL_BSP_SCHEDULE_DELAY="600000", OTEL_METRIC_EXPORT_INTERVAL="600000")  # export at exit only
    async with listener, open_cli("run", "--otel", "--workspace", str(tmp_path), "hello", cwd=tmp_path,
                                  env=env) as cli:
        async with await listener.accept():  # the run is over: the exporters flush at exit
            cli.signal(signal.SIGINT)
            with trio.move_on_after(15):
                await cli.process.wait()
            assert cli.process.returncode == 130, (cli.stdout, cli.stderr)
    assert cli.stdout.startswith("Hello from trio_agent's local scripted model.")
    assert progress(cli.stderr)[-2].startswith("-- completed: ")
    assert progress(cli.stderr)[-1] == "trio-agent: Ctrl-C: exiting now, without waiting for cleanup"
    assert "Traceback" not in cli.stdout + cli.stderr
