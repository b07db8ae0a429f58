"""What the session tests share: a user's environment with its own sessions home and
codex home, a turn of the console script against a loopback ``FakeResponsesServer``
over HTTPS (each request is the whole body: what a resumed session replays shows), the
session files of a home, and codex's native rollout installed where codex keeps it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from trio_agent.testing import FakeHttpRequest, FakeResponsesServer

from ..conftest import scripted
from ._cli import cli_env
from ._console import Ran, script
from .test_flags import answer

FIXTURES = Path(__file__).parent.parent / "fixtures"
NATIVE_ID = "01a22bdc-9b35-7942-acd8-1d71d4e426f9"  # tests/fixtures/codex_native_rollout.jsonl
HINT = "To continue this session, run trio-agent resume "
Json = dict[str, Any]


def user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return cli_env(**{"TRIO_AGENT_HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex-home"),
                      "OPENAI_API_KEY": "sk-test", **extra})


def session_files(home: Path) -> list[Path]:
    return sorted((home / "sessions").glob("*/*/*/rollout-*.jsonl"))


def file_lines(path: Path) -> list[Json]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def hinted(ran: Ran) -> str:
    """The session id of the one resume line, the last on stderr."""
    last = ran.err.splitlines()[-1]
    assert last.startswith(HINT) and ran.err.count(HINT) == 1 and HINT not in ran.out, ran.err
    return last.removeprefix(HINT)


def texts(body: Json) -> list[str]:
    return [part.get("text", "") for item in body.get("input", []) if item.get("type") == "message"
            for part in item.get("content", []) if isinstance(part, dict)]


async def turn(server: FakeResponsesServer, tmp_path: Path, *args: str, reply: str = "THE-ANSWER",
               cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[Ran, FakeHttpRequest]:
    """``trio-agent ARGS --api-base ... --transport https`` answered once with ``reply``."""
    seen: list[FakeHttpRequest] = []

    async def model() -> None:
        request = await server.accept_http()
        seen.append(request)
        await request.send_sse(answer(f"resp-{len(seen)}", reply))

    async with scripted(model, 90) as nursery:
        ran = await script(*args[:1], "--api-base", server.http_base_url, "--transport", "https", *args[1:],
                           cwd=cwd or tmp_path, env=env or user_env(tmp_path), seconds=80)
        if not seen:  # the command ended without asking the model: show what it said
            nursery.cancel_scope.cancel()
    assert seen, (ran.code, ran.out, ran.err)
    return ran, seen[0]


def install_native(codex_home: Path) -> Path:
    """Codex 0.171's native (paginated) rollout, where codex keeps it."""
    folder = codex_home / "sessions" / "2026" / "11" / "30"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-2026-11-30T09-50-07-{NATIVE_ID}.jsonl"
    shutil.copyfile(FIXTURES / "codex_native_rollout.jsonl", path)
    return path
