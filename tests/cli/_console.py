"""The installed ``trio-agent`` console script, run as a user runs it (the venv's
``bin/trio-agent``, this checkout first on ``PYTHONPATH`` as ``cli_env`` sets it), and
the checks every first-contact test makes: the exit status, what is on stdout and on
stderr, and no traceback on either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from ._cli import cli_env

SCRIPT = Path(sys.executable).parent / "trio-agent"  # the venv's console script (pip install -e)
TRACEBACK = "Traceback (most recent call last)"


class Ran:
    """A finished command: ``code``, ``out`` and ``err`` (decoded)."""

    def __init__(self, done: subprocess.CompletedProcess[bytes]) -> None:
        self.code = done.returncode
        self.out = done.stdout.decode()
        self.err = done.stderr.decode()
        assert TRACEBACK not in self.out and TRACEBACK not in self.err, (self.out, self.err)

    def events(self) -> list[dict[str, Any]]:
        """stdout as JSON lines (``--jsonl``): every line must be one JSON object."""
        return [json.loads(line) for line in self.out.splitlines()]

    def event(self, kind: str) -> dict[str, Any]:
        payload: dict[str, Any] = next(e for e in self.events() if e["type"] == kind)["payload"]
        return payload


async def script(*args: str, cwd: Path, env: dict[str, str] | None = None,
                 stdin: bytes | int | None = subprocess.DEVNULL, seconds: float = 60) -> Ran:
    assert SCRIPT.exists(), f"{SCRIPT}: install the package into this venv (pip install -e .)"
    with trio.fail_after(seconds):
        done = await trio.run_process([str(SCRIPT), *args], cwd=cwd, env=env or cli_env(), stdin=stdin,
                                      capture_stdout=True, capture_stderr=True, check=False)
    return Ran(done)


def refused(ran: Ran, *, usage: str | None = "trio-agent run") -> str:
    """The one error line of a command refused with exit status 2 (after ``usage``'s
    usage line, when given), nothing on stdout."""
    assert ran.code == 2, (ran.code, ran.out, ran.err)
    assert ran.out == ""
    lines = ran.err.splitlines()
    if usage is not None:
        assert len(lines) >= 2 and lines[0].startswith(f"usage: {usage} "), lines
    else:
        assert len(lines) == 1, lines
    return lines[-1]
