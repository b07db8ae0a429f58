"""``trio-agent serve`` and ``trio-agent app-server`` tune their garbage collector once
started (``trio_agent/_collector.py``): what is alive when the transport starts -- the
app server among it -- is frozen, and the thresholds are ``COLLECTOR_THRESHOLD``.

Each command runs in a fresh process (``gc.freeze`` is for the whole process: it must
not touch the test runner's), through the launcher as ``python -m trio_agent`` runs
it, with ``_run_transport`` replaced by a report of the collector's state: the state
any transport then serves with. Fails on main (the default thresholds there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._collector import COLLECTOR_THRESHOLD

REPO = Path(ta.__file__).resolve().parent.parent
STEP = 60  # seconds for the process (imports, the local model, the app server)

# Runs in the child: the report goes to descriptor 1 (on stdio, serve points sys.stdout
# at stderr: the protocol owns stdout).
_REPORT = """
import gc, json, os, sys
from trio_agent._serve import _command

async def report(app, listen):
    made_now = [[]]  # (a container: tracked)
    os.write(1, json.dumps({
        "threshold": list(gc.get_threshold()),
        "frozen": gc.get_freeze_count(),
        "app_frozen": not any(obj is app for obj in gc.get_objects()),
        "new_tracked": gc.is_tracked(made_now) and any(obj is made_now for obj in gc.get_objects()),
    }).encode() + b"\\n")

_command._run_transport = report
import _trio_agent_launch
sys.exit(_trio_agent_launch.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", [["serve", "--local"], ["app-server", "--listen", "stdio://"]])
def test_the_server_process_runs_with_its_collector_tuned(tmp_path: Path, command: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(tmp_path / "no-codex"), "OPENAI_API_KEY": ""}
    env.pop("OPENAI_API_KEY")
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, *command, "--home", str(tmp_path / "home")],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=STEP,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    state = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert state["threshold"] == list(COLLECTOR_THRESHOLD)
    assert state["app_frozen"] is True  # alive at start: in the permanent generation, never walked
    assert state["frozen"] > 10_000  # the modules of the CLI, Trio and the app server too
    assert state["new_tracked"] is True  # what is made afterwards is collected as usual
