"""Running the ``trio-agent`` console script as a subprocess, from this checkout.

``cli_env()`` is the environment of a user with no API key, no warm daemon and none
of the variables the command reads (so the built-in local model answers unless a test says otherwise);
``run_cli()`` runs the command to its end (``python -m trio_agent``, or with
``command=SCRIPT`` the installed ``trio-agent`` console script); ``open_cli()`` starts it and collects its
output line by line as it arrives, so a test can wait for a line (a marker the command
printed) before it acts, and kills it if the test fails first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import trio

import trio_agent as ta

ROOT = Path(ta.__file__).resolve().parent.parent
COMMAND = [sys.executable, "-m", "trio_agent"]
SCRIPT = [str(Path(sys.executable).with_name("trio-agent"))]  # the installed console script (a user's command)
_READ_BY_CLI = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE_URL", "OPENAI_RESPONSES_WEBSOCKET_URL",
                "CODEX_HOME")
NO_CODEX_HOME = str(ROOT / "tests" / "fixtures" / "no-codex-home")  # no Codex login to sign in with


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _READ_BY_CLI and not k.startswith(("OTEL_", "NANOCODEX_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)  # this checkout
    env["CODEX_HOME"] = NO_CODEX_HOME
    env["TRIO_AGENT_NO_DAEMON"] = "1"  # never a warm daemon the developer runs (tests/daemon: their own)
    env.update(extra)
    return env


async def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: bytes | int | None = subprocess.DEVNULL,
    seconds: float = 60, command: list[str] = COMMAND,
) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(seconds):
        return await trio.run_process([*command, *args], cwd=cwd, env=env or cli_env(), stdin=stdin,
                                      capture_stdout=True, capture_stderr=True, check=False)


class RunningCli:
    """A started command: ``stdout``/``stderr`` as received so far, ``wait_for(text)``."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.stdout = ""
        self.stderr = ""
        self._changed = trio.Condition()

    async def _read(self, stream: trio.abc.ReceiveStream, name: str) -> None:
        while data := await stream.receive_some(65536):
            setattr(self, name, getattr(self, name) + data.decode(errors="replace"))
            async with self._changed:
                self._changed.notify_all()

    async def wait_for(self, check: str | Callable[[RunningCli], bool], seconds: float = 30) -> None:
        """Until ``check`` (a text on stdout, or a predicate) holds; fails after ``seconds``."""
        test = check if callable(check) else (lambda cli: check in cli.stdout)
        with trio.fail_after(seconds):
            async with self._changed:
                while not test(self):
                    await self._changed.wait()

    def signal(self, signum: int = signal.SIGINT) -> None:
        self.process.send_signal(signum)

    async def wait(self, seconds: float = 30) -> int:
        with trio.fail_after(seconds):
            return await self.process.wait()

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


@asynccontextmanager
async def open_cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
                   stdin: int | None = subprocess.DEVNULL, command: list[str] = COMMAND,
                   start_new_session: bool = False) -> AsyncIterator[RunningCli]:
    process = await trio.lowlevel.open_process([*command, *args], cwd=cwd, env=env or cli_env(), stdin=stdin,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               start_new_session=start_new_session)
    cli = RunningCli(process)
    try:
        async with trio.open_nursery() as nursery:
            assert process.stdout is not None and process.stderr is not None
            nursery.start_soon(cli._read, process.stdout, "stdout")
            nursery.start_soon(cli._read, process.stderr, "stderr")
            try:
                yield cli
                await cli.wait()
            finally:
                if process.returncode is None:  # the test failed first: leave nothing running
                    process.kill()
                    with trio.CancelScope(shield=True):
                        await process.wait()
    finally:
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                await stream.aclose()


_SESSION_HINT = "To continue this session, run trio-agent resume "


def progress(stderr: str) -> list[str]:
    """``run``'s stderr lines without the session's resume hint (its last line, after the
    summary, when the run kept a session: tests/cli/test_sessions.py asserts it)."""
    return [line for line in stderr.splitlines() if not line.startswith(_SESSION_HINT)]
