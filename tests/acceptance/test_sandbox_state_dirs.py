"""A sandboxed command cannot rewrite what decides what runs unconfined later, even
where it lies inside the workspace (sec4's review; codex keeps ``.codex`` and
``.agents`` read-only the same way):

- ``.codex`` and ``.agents`` at the top of the workspace (and of a writable root):
  codex's project ``config.toml`` names MCP servers and a model provider, ``.agents``
  holds skills;
- trio-agent's home (``$TRIO_AGENT_HOME``, else ``~/.trio-agent``) and codex's
  (``$CODEX_HOME``, else ``~/.codex``) when the workspace holds them -- a workspace
  that is the home directory: the stored threads there carry each thread's sandbox,
  which a resume restores.

Real ``bwrap``; each refusal has its positive control: the rest of the workspace, a
file named ``.codex`` deeper down, and a home that is the workspace itself stay
writable, and the same writes outside the sandbox work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._sandbox import resolve_sandbox
from trio_agent._tools.exec_command import ShellSessions

WRITE = "{{ echo x > {path}; }} 2>/dev/null && echo wrote || echo refused"


@asynccontextmanager
async def sandboxed(workspace: Path, *roots: Path) -> AsyncIterator[ShellSessions]:
    sandbox = ta.Sandbox(ta.SandboxMode.WORKSPACE_WRITE, writable_roots=list(roots))
    async with trio.open_nursery() as nursery:
        sessions = ShellSessions(nursery, workspace, sandbox=resolve_sandbox(sandbox).confinement)
        try:
            yield sessions
        finally:
            await sessions.aclose()


async def writes(shell: ShellSessions, path: str, *, outside_sandbox: bool = False) -> str:
    result = await shell.exec_command({"cmd": WRITE.format(path=path), "login": False, "yield_time_ms": 30000},
                                      outside_sandbox=outside_sandbox)
    return str(result["output"]).strip()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory that is the workspace, holding both agents' homes by default."""
    place = tmp_path / "home"
    for directory in (".trio-agent/threads", ".codex/sessions", "project/.codex", "project/.agents/skills",
                      "project/src/.codex", "extra/.codex"):
        (place / directory).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(place))
    monkeypatch.delenv("TRIO_AGENT_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return place


async def test_codex_and_agents_directories_of_each_root_are_read_only(home: Path) -> None:
    extra = home / "extra"
    async with sandboxed(home / "project", extra) as shell:
        for path in (".codex/config.toml", ".agents/skills/s.md", f"{extra}/.codex/config.toml"):
            assert await writes(shell, path) == "refused", path
        for path in ("src/.codex/ok.txt", "src/main.py", f"{extra}/notes.txt"):
            assert await writes(shell, path) == "wrote", path
        assert await writes(shell, ".codex/config.toml", outside_sandbox=True) == "wrote"


async def test_the_agents_homes_inside_the_workspace_are_read_only(home: Path) -> None:
    async with sandboxed(home) as shell:
        for path in (".trio-agent/threads/t.jsonl", ".codex/sessions/r.jsonl", ".codex/config.toml"):
            assert await writes(shell, path) == "refused", path
        assert await writes(shell, "notes.txt") == "wrote"
        assert await writes(shell, ".trio-agent/threads/t.jsonl", outside_sandbox=True) == "wrote"


async def test_homes_named_by_the_environment_are_the_ones_kept(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / "state").mkdir()
    monkeypatch.setenv("TRIO_AGENT_HOME", str(home / "state"))
    async with sandboxed(home) as shell:
        assert await writes(shell, "state/t.jsonl") == "refused"
        assert await writes(shell, ".trio-agent/threads/t.jsonl") == "wrote"  # not the home any more


async def test_a_home_that_is_the_workspace_stays_writable(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIO_AGENT_HOME", str(home / ".trio-agent"))
    async with sandboxed(home / ".trio-agent") as shell:
        assert await writes(shell, "threads/t.jsonl") == "wrote"


# -- a missing one, created by a command (sec7) ------------------------------------------------------


PLANT = "mkdir -p {path} && echo '[mcp_servers.x]' > {path}/config.toml && echo planted"


async def test_a_missing_codex_a_command_creates_is_moved_aside_once_it_ends(tmp_path: Path, home: Path) -> None:
    # bwrap 0.8 cannot keep a missing name from being created without a mount point in
    # the workspace itself (_sandbox_state): once the command's sandbox is gone, what it
    # made there is moved aside (nothing deleted) and its output says so. On main the
    # planted .codex/config.toml stays, for the next codex started there to run.
    project = home / "project"
    (project / ".codex").rmdir()
    (project / ".agents" / "skills").rmdir()
    (project / ".agents").rmdir()
    async with sandboxed(project) as shell:
        result = await shell.exec_command({"cmd": PLANT.format(path=".codex") + "; echo x > ordinary",
                                           "login": False, "yield_time_ms": 30000})
        output = str(result["output"])
        assert output.startswith("planted\n"), output
        moved = project / ".codex.created-by-a-command"
        assert f"[sandbox] {project}/.codex was created while the command ran; moved to {moved}" in output
        assert not (project / ".codex").exists() and (moved / "config.toml").read_text() == "[mcp_servers.x]\n"
        # The positive controls: the rest of what it wrote stays; a command that makes
        # neither adds no note; and a second plant is moved beside the first.
        assert (project / "ordinary").read_text() == "x\n"
        quiet = await shell.exec_command({"cmd": "echo y > ordinary", "login": False, "yield_time_ms": 30000})
        assert quiet["output"] == ""
        again = await shell.exec_command({"cmd": PLANT.format(path=".agents"), "login": False, "yield_time_ms": 30000})
        assert f"{project}/.agents was created while the command ran; moved to " \
               f"{project}/.agents.created-by-a-command" in str(again["output"])
        # An existing one is bound read-only (nothing created, nothing moved).
        (project / ".codex").mkdir()
        kept = await shell.exec_command({"cmd": PLANT.format(path=".codex") + " || echo refused", "login": False,
                                         "yield_time_ms": 30000})
        assert "refused" in str(kept["output"]) and "[sandbox]" not in str(kept["output"])


async def test_a_missing_home_a_command_creates_is_reported_not_moved(tmp_path: Path, home: Path) -> None:
    # The agent's own process may create its home meanwhile (its sessions): only said.
    # (codex's home is moved aside: trio-agent never creates it -- test_sandbox_state_races.)
    (home / ".trio-agent" / "threads").rmdir()
    (home / ".trio-agent").rmdir()
    async with sandboxed(home) as shell:
        result = await shell.exec_command({"cmd": PLANT.format(path=".trio-agent"), "login": False,
                                           "yield_time_ms": 30000})
        assert f"[sandbox] {home}/.trio-agent was created while the command ran (an agent's home: left in place)" \
            in str(result["output"])
        assert (home / ".trio-agent" / "config.toml").exists()
