"""The first-turn context messages: permissions, environment and AGENTS.md (SPEC sec. 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._runtime._turns._context_io import AGENTS_MD_CAP, agents_md_fingerprint, agents_md_watch, load_agents_md
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, run_model, scripted


def test_agents_md_is_gathered_from_the_git_root_down_to_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    workspace = root / "pkg" / "sub"
    workspace.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "AGENTS.md").write_text("root rules")
    (root / "pkg" / "AGENTS.md").write_text("pkg rules")
    (root / "pkg" / "AGENTS.override.md").write_text("pkg override")
    (workspace / "AGENTS.md").write_text("sub rules")
    (tmp_path / "AGENTS.md").write_text("outside the repo: never read")
    assert load_agents_md(workspace) == "root rules\n\npkg override\n\nsub rules"


def test_agents_md_without_git_reads_only_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "AGENTS.md").write_text("parent")
    assert load_agents_md(workspace) is None
    (workspace / "AGENTS.md").write_text("  \n")
    assert load_agents_md(workspace) is None
    (workspace / "AGENTS.md").write_text("mine")
    assert load_agents_md(workspace) == "mine"


def test_agents_md_is_capped_at_32_kib(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("a" * (AGENTS_MD_CAP + 100))
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "AGENTS.md").write_text("never reached")
    text = load_agents_md(sub)
    assert text is not None
    assert len(text) == AGENTS_MD_CAP
    assert "never reached" not in text


async def test_first_request_carries_permissions_environment_and_agents_md(
    server: FakeResponsesServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text("Always run the tests.")
    seen: list[dict] = []

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        seen.append(await conn.next_request())
        await conn.send_final("resp-final")

    async with scripted(script):
        await run_model(server, workspace, "hello")
    permissions, context, prompt = seen[0]["input"]
    assert permissions["role"] == "developer"
    assert "<permissions instructions>" in permissions["content"][0]["text"]
    agents, environment = (part["text"] for part in context["content"])
    assert agents.startswith(f"# AGENTS.md instructions for {workspace.resolve()}")
    assert "Always run the tests." in agents
    assert f"<cwd>{workspace.resolve()}</cwd>" in environment
    assert "<current_date>" in environment and "<timezone>" in environment and "<shell>" in environment
    assert prompt["content"] == [{"type": "input_text", "text": "hello"}]
    assert prompt["id"].startswith("msg_")


@pytest.mark.parametrize("before", [None, "Old instructions."])
async def test_agents_md_written_after_the_agent_opened_is_what_the_first_request_carries(
    server: FakeResponsesServer, workspace: Path, before: str | None
) -> None:
    """The first turn's context is gathered when the agent opens (while its warmup is on
    the network); an AGENTS.md written, or rewritten, before the first prompt is read
    again -- a warm daemon's prewarmed agent may wait minutes for its prompt."""
    if before is not None:
        (workspace / "AGENTS.md").write_text(before)
    seen: list[dict[str, Any]] = []
    warmed = trio.Event()

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        warmed.set()
        seen.append(await conn.next_request())
        await conn.send_final("resp-final")

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        await warmed.wait()
        await trio.testing.wait_all_tasks_blocked()  # the runner started: the context was gathered
        (workspace / "AGENTS.md").write_text("Always run the tests, and say so.")
        await (await agent.prompt("hello")).result()
    _permissions, context, _prompt = seen[0]["input"]
    agents = context["content"][0]["text"]
    assert "Always run the tests, and say so." in agents
    assert "Old instructions." not in agents


def test_the_agents_md_fingerprint_changes_with_the_files(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    work = tmp_path / "pkg"
    work.mkdir()

    def fingerprint() -> tuple[object, ...]:
        return agents_md_fingerprint(watch)

    watch = agents_md_watch(work)
    assert watch == (str(work), str(tmp_path))  # up to the git root, no AGENTS.md yet
    empty = fingerprint()
    assert fingerprint() == empty
    (tmp_path / "AGENTS.md").write_text("root")  # added: its directory changed
    assert fingerprint() != empty
    watch = agents_md_watch(work)
    assert watch == (str(work), str(tmp_path), str(tmp_path / "AGENTS.md"))
    written = fingerprint()
    (tmp_path / "AGENTS.md").write_text("root, rewritten in place")
    assert fingerprint() != written
    rewritten = fingerprint()
    (work / "AGENTS.override.md").write_text("override")
    assert fingerprint() != rewritten
    again = fingerprint()
    (tmp_path / ".git").rmdir()  # no git root any more: its directory changed
    assert fingerprint() != again
