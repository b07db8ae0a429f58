"""``trio-agent run --record FILE`` and ``trio-agent replay FILE``, run as the console
script in a subprocess (no ``OPENAI_API_KEY``: the built-in local scripted model)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trio_agent as ta
from trio_agent.testing import Cassette

ROOT = Path(ta.__file__).resolve().parent.parent


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "trio-agent"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "trio_agent"]
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)  # this checkout
    return subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def record(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    run = cli("run", "--record", "session.jsonl", "--workspace", str(workspace), "run: ls", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "no OPENAI_API_KEY set and no Codex login at " in run.stderr  # a notice: on stderr
    assert "; using the built-in local scripted model" in run.stderr
    return tmp_path / "session.jsonl", workspace


def test_a_recorded_cli_run_replays_with_one_summary_line(tmp_path: Path) -> None:
    path, workspace = record(tmp_path)
    cassette = Cassette.load(path)
    assert cassette.inputs()[0].data["text"] == "run: ls"
    assert any(o.kind == "ws.recv" and "exec_command" in str(o.data) for o in cassette.observations)
    replayed = cli("replay", str(path), "--workspace", str(workspace), cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    # the prompt (no warmup: ``trio-agent run`` has its prompt at the start) and the tool's output
    assert replayed.stdout.splitlines() == [
        f"replay ok: 1 turn(s), 2 request(s) on 1 connection(s) matched the recording ({path})"
    ]


def test_a_changed_workspace_fails_the_replay_with_the_diff(tmp_path: Path) -> None:
    path, workspace = record(tmp_path)
    (workspace / "b.txt").write_text("b\n")  # `ls` now answers differently
    replayed = cli("replay", str(path), "--workspace", str(workspace), cwd=tmp_path)
    assert replayed.returncode == 1, replayed.stderr
    lines = replayed.stdout.splitlines()
    assert lines[0].startswith("replay mismatch at cassette line ")
    assert "frame 2 the agent sent on connection 1 (WebSocket) differs from the recording" in lines[0]
    # (the login shell may print its own notices first, e.g. inside the sandbox)
    assert any(line.startswith('-          "text": "') and line.endswith('a.txt\\n",') for line in lines)
    assert any(line.startswith('+          "text": "') and line.endswith('a.txt\\nb.txt\\n",') for line in lines)
    assert lines[-1].startswith("replay FAILED: replay mismatch at cassette line ")


def test_a_cassette_that_cannot_be_replayed_exits_2_saying_why(tmp_path: Path) -> None:
    path, _ = record(tmp_path)
    path.write_bytes(path.read_bytes()[:-30])  # cut inside the last line
    replayed = cli("replay", str(path), cwd=tmp_path)
    assert replayed.returncode == 2
    assert "the last line is not complete JSON" in replayed.stderr and "truncated" in replayed.stderr
    missing = cli("replay", str(tmp_path / "nope.jsonl"), cwd=tmp_path)
    assert missing.returncode == 2 and "no such cassette" in missing.stderr


async def test_ctrl_c_cancels_a_replay_with_one_line_on_stderr(tmp_path: Path) -> None:
    """A replay's command runs for real: one that waits (only when replayed: ``go``
    exists then) is cancelled by SIGINT; one ``-- cancelled`` line on stderr, 130, and
    a second SIGINT after that line changes nothing (the replay settled, as ``run``)."""
    import signal

    import trio

    from tests._os_facts import wait_for_os_fact, wait_no_processes_in

    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = "run: if [ -e go ]; then touch running; sleep 60; fi; echo ok"
    recorded = cli("run", "--record", "session.jsonl", "--workspace", str(workspace), command, cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    (workspace / "go").touch()
    script = Path(sys.executable).parent / "trio-agent"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    with (tmp_path / "out").open("w") as out, (tmp_path / "err").open("w") as err:
        process = await trio.lowlevel.open_process(
            [str(script), "replay", "session.jsonl", "--workspace", str(workspace)], cwd=tmp_path, env=env,
            stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        try:
            await wait_for_os_fact((workspace / "running").exists, "the replayed command starting")
            process.send_signal(signal.SIGINT)
            await wait_for_os_fact(lambda: "-- cancelled" in (tmp_path / "err").read_text(), "the cancelled line")
            process.send_signal(signal.SIGINT)  # after the line: ignored
            with trio.fail_after(60):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert code == 130
    assert (tmp_path / "out").read_text() == ""
    lines = (tmp_path / "err").read_text().splitlines()
    assert [line for line in lines if line.startswith("-- cancelled")] == [lines[-1]]
    assert lines[-1].startswith("-- cancelled by Ctrl-C: the replay, after ")
    assert "Traceback" not in (tmp_path / "err").read_text()
    await wait_no_processes_in(workspace)


def test_a_stalled_replay_ends_at_its_bound_saying_what_it_waited_for(tmp_path: Path) -> None:
    """Issue 29: a cassette whose last answer was cut out by hand stalls the agent (it
    waits for frames that never come); --timeout bounds it and the mismatch names the
    recorded step that did not happen."""
    path, workspace = record(tmp_path)
    lines = path.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if '"ws.recv"' in line and "response.completed" in line)
    path.write_text("\n".join(lines[:last] + lines[last + 1:]) + "\n")
    replayed = cli("replay", str(path), "--workspace", str(workspace), "--timeout", "3", cwd=tmp_path)
    assert replayed.returncode == 1, replayed.stderr
    first = replayed.stdout.splitlines()[0]
    assert first.startswith("replay mismatch: the replay did not finish within 3 s; it was waiting for cassette line ")
    assert "the agent to close connection 1" in first or "turn 1 to end" in first, first

