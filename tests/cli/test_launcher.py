"""The console script's launcher (``_trio_agent_launch``) on its own: ``--version``
answered without importing ``trio_agent``, and a Ctrl-C at any moment of start-up --
before the command's own signal handling begins -- is exit status 130 with one line.

The console script is this environment's (``bin/trio-agent`` beside the interpreter:
the editable install of this checkout), run as a subprocess. A Ctrl-C "at a moment of
start-up" is made deterministic with the launcher's test-only pause
(``TRIO_AGENT_TEST_PAUSE=POINT:FD``): at ``POINT`` it reports on the socket ``FD`` and
blocks there; the test then sends SIGINT.
"""

from __future__ import annotations

import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import _trio_agent_launch
import trio_agent as ta

from .._os_facts import pid_alive
from ._cli import cli_env

SCRIPT = Path(sys.executable).parent / "trio-agent"
POINTS = ("start", "in-process", "imported")  # main entered; no daemon takes it; trio_agent.cli.main imported


def _env(**extra: str) -> dict[str, str]:
    env = cli_env(**extra)
    del env["PYTHONPATH"]  # the installed package, as a user has it
    return env


def test_version_is_the_installed_version_without_importing_trio_agent(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", str(SCRIPT), "--version"], env=_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"trio-agent {ta.__version__}\n"
    imported = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "_trio_agent_launch" in imported  # the harness sees the imports
    assert not [name for name in imported if name.split(".")[0] in ("trio_agent", "trio")], imported
    assert ta.__version__ == _trio_agent_launch.__version__ == importlib.metadata.version("trio-agent")


def test_version_after_another_option_is_still_argparse_s(tmp_path: Path) -> None:
    # Only a leading --version is the launcher's; anywhere else the CLI parses it.
    done = subprocess.run([str(SCRIPT), "run", "--version"], env=_env(), cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid:  # the session id (field 6 of stat)
                members.append(int(entry))
    return members


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("daemon", ["no daemon", "a daemon directory without a daemon"])
def test_ctrl_c_during_start_up_is_130_and_one_line(tmp_path: Path, point: str, daemon: str) -> None:
    ours, theirs = socket.socketpair()
    extra = {"TRIO_AGENT_TEST_PAUSE": f"{point}:{theirs.fileno()}"}
    if daemon != "no daemon":  # the launcher looks for the daemon's socket first
        extra.update(TRIO_AGENT_DAEMON_DIR=str(tmp_path / "daemon"))
    env = _env(**extra)
    if daemon != "no daemon":
        env.pop("TRIO_AGENT_NO_DAEMON")
    with ours, theirs:
        process = subprocess.Popen([str(SCRIPT), "run", "--local", "hello"], env=env, cwd=tmp_path,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   pass_fds=(theirs.fileno(),), start_new_session=True)
        try:
            theirs.close()
            ours.settimeout(60)
            assert ours.recv(100) == f"{point}\n".encode()  # it is paused there
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, (process.returncode, err)  # an exit, not death by SIGINT (-2)
    assert err == b"-- cancelled by Ctrl-C\n" and out == b""
    assert not pid_alive(process.pid) and _session_members(process.pid) == []  # nothing left behind


def test_without_a_ctrl_c_the_paused_start_up_goes_on(tmp_path: Path) -> None:
    # The positive control: the same pause released, not interrupted: the run completes.
    ours, theirs = socket.socketpair()
    with ours, theirs:
        process = subprocess.Popen([str(SCRIPT), "run", "--local", "hello"],
                                   env=_env(TRIO_AGENT_TEST_PAUSE=f"imported:{theirs.fileno()}"), cwd=tmp_path,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   pass_fds=(theirs.fileno(),))
        theirs.close()
        ours.settimeout(60)
        assert ours.recv(100) == b"imported\n"
        ours.close()
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert b"You said: 'hello'" in out and b"Traceback" not in err
