"""Running ``trio-agent exec`` as a subprocess of this checkout, against the fake model
on loopback (``model_server``) or the built-in local model; ``events()`` parses its
stdout, where every line must be one JSON object."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from trio_agent.testing import FakeResponsesServer

from ..cli._cli import cli_env, run_cli
from ._fake_model import fake_model

Json = dict[str, Any]
STEP = 60  # seconds for one exec process (real processes, a loaded machine)


@asynccontextmanager
async def model_server() -> AsyncIterator[FakeResponsesServer]:
    """The fake model on 127.0.0.1:0, answering every exec process until the block ends."""
    server = FakeResponsesServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        nursery.start_soon(fake_model, server)
        yield server
        nursery.cancel_scope.cancel()


def exec_env(home: Path, server: FakeResponsesServer | None = None, **extra: str) -> dict[str, str]:
    """A user's environment for exec: threads under ``home``; the fake model at
    ``server`` (with a key), else no key at all (the local model)."""
    env = cli_env(TRIO_AGENT_HOME=str(home))
    if server is not None:
        env.update(OPENAI_API_KEY="test-key", OPENAI_BASE_URL=server.http_base_url)
    env.update(extra)
    return env


def events(stdout: bytes) -> list[Json]:
    """Every stdout line as JSON (a line that is not JSON fails the test)."""
    parsed = []
    for line in stdout.decode().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            raise AssertionError(f"exec printed a line that is not JSON: {line!r}") from None
        assert isinstance(event, dict) and isinstance(event.get("type"), str), line
        parsed.append(event)
    return parsed


async def run_exec(*args: str, cwd: Path, env: dict[str, str], stdin: bytes = b"",
                   ) -> subprocess.CompletedProcess[bytes]:
    return await run_cli("exec", *args, cwd=cwd, env=env, stdin=stdin, seconds=STEP)


def completed_items(evts: list[Json], kind: str) -> list[Json]:
    return [e["item"] for e in evts if e["type"] == "item.completed" and e["item"]["type"] == kind]
