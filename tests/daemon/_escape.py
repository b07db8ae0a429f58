"""Issue 21's attack on the warm daemon, from a command an agent runs (``_attack_script``).

``Escape`` holds what one attempt needs: a workspace, a host directory ``out`` the
sandbox cannot write (outside the workspace and outside ``/tmp``, which both confined
modes replace), and the ``run`` request that would touch ``out/ESCAPED`` with
``danger-full-access``. ``prime`` makes the daemon hold a spare for exactly that
configuration first, so that a request which is not refused is served at once -- the
issue's "second try". ``attack`` runs the script through ``ShellSessions.exec_command``,
in the sandbox or (the positive control) outside it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trio_agent._tools.exec_command import ShellSessions

from ._daemon import Daemon

SCRIPT = Path(__file__).with_name("_attack_script.py")
OUTSIDE_PARENT = "/var/tmp"  # neither the workspace nor /tmp: what the sandbox shows of the host, read-only


class Escape:
    def __init__(self, daemon: Daemon, workspace: Path, out: Path) -> None:
        self.daemon = daemon
        self.workspace = workspace
        self.out = out
        self.escaped = out / "ESCAPED"
        self.options = ("--local", "--sandbox", "danger-full-access", "--workspace", str(workspace))
        self.request = out / "request.json"
        argv = ["run", *self.options, f"run: touch {self.escaped}"]
        self.request.write_text(json.dumps({"argv": argv, "cwd": str(workspace), "env": daemon.env}))

    async def prime(self) -> set[int]:
        return await self.daemon.prime(*self.options, cwd=self.workspace)

    async def attack(self, shell: ShellSessions, *, outside_sandbox: bool = False, socket: str | None = None) -> str:
        """The script's two answer lines (``status: ...``, ``run: ...``), and whatever
        the served run printed between them."""
        path = socket or f"{self.daemon.directory}/daemon.sock"
        cmd = f"{sys.executable} {SCRIPT} {path} {self.request}"
        result = await shell.exec_command({"cmd": cmd, "login": False, "yield_time_ms": 30000},
                                          outside_sandbox=outside_sandbox)
        assert "exit_code" in result, result
        return str(result["output"])


@contextmanager
def outside_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="trio-agent-outside-", dir=OUTSIDE_PARENT))
    try:
        yield path
    finally:
        shutil.rmtree(path)
