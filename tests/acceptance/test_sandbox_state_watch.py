"""What a sandboxed command leaves at ``.codex`` or ``.agents`` is compared with what was
there when it started, not only when nothing was (sec8's review of sec7's
``_sandbox_state``): codex reads a project's ``.codex/config.toml`` (MCP servers, a
model provider: run unconfined).

On sec7 only a missing place was watched, and these plants stayed, nothing said:

- a second command, started while the first one's ``.codex`` existed (bound read-only
  for it, so not watched), made it again once the first one's end moved it aside;
- ``.codex`` a file (codex's own sandbox leaves an empty one after a crash), a link, a
  dangling link: none is bound read-only (existing directories are), nor was it
  watched; a command replaced it by a directory holding ``config.toml``;
- with the workspace at ``$HOME``, codex's home ``~/.codex`` created by a command was
  only reported (trio-agent never creates it).

Real ``bwrap``, driven through stdin (no timers). Positive controls: a command that
leaves an existing ``.codex`` (a directory, a file, a link) alone leaves it, and says
nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trio_agent._tools._sandbox_state import MOVED_SUFFIX

from .test_sandbox_state_dirs import PLANT, home, sandboxed

__all__ = ["home"]  # a fixture, used by name


async def test_a_second_command_cannot_make_it_again_once_the_first_ones_is_moved_aside(home: Path) -> None:
    # The first command (a session still running) made .codex; a second one starts then
    # (.codex exists: bound read-only for it, not watched); the first one ends and its
    # .codex is moved aside; the second then makes .codex again. On sec7 that one stayed,
    # nothing said. Each step is driven through stdin (no timers).
    project = home / "project"
    (project / ".codex").rmdir()
    async with sandboxed(project) as shell:
        first = await shell.exec_command({"cmd": "read go; mkdir .codex && echo made", "login": False,
                                          "yield_time_ms": 250})
        assert "session_id" in first, first
        made = await shell.write_stdin({"session_id": first["session_id"], "chars": "\n", "yield_time_ms": 30000})
        assert made["output"].startswith("made\n") and "moved to" in str(made["output"]), made
        # Now again, the second command started while the first one's .codex exists.
        first = await shell.exec_command({"cmd": "read go; echo done", "login": False, "yield_time_ms": 250})
        assert "session_id" in first, first
        (project / ".codex").mkdir()  # what the first command made (the same on the host)
        second = await shell.exec_command({"cmd": f"read go; {PLANT.format(path='.codex')} || echo refused",
                                           "login": False, "yield_time_ms": 250})
        assert "session_id" in second, second
        ended = await shell.write_stdin({"session_id": first["session_id"], "chars": "\n", "yield_time_ms": 30000})
        assert "exit_code" in ended and f"{project}/.codex was created while the command ran" in str(ended["output"])
        assert not (project / ".codex").exists()
        late = await shell.write_stdin({"session_id": second["session_id"], "chars": "\n", "yield_time_ms": 30000})
        assert "exit_code" in late, late
        assert str(late["output"]).startswith("planted\n"), late  # the host's rename took its read-only .codex away
        assert f"{project}/.codex was created while the command ran; moved to" in str(late["output"]), late
        assert not (project / ".codex").exists()
        # The positive control: with no command running, an existing .codex is not watched.
        (project / ".codex").mkdir()
        kept = await shell.exec_command({"cmd": "echo y > ordinary", "login": False, "yield_time_ms": 30000})
        assert kept["output"] == "" and (project / ".codex").is_dir()


@pytest.mark.parametrize("left", ["file", "link", "dangling"])
async def test_a_codex_that_is_no_directory_cannot_be_made_one(home: Path, left: str) -> None:
    # codex's own sandbox leaves an empty file named .codex in the workspace (its
    # /dev/null mount point, after a crash); a user may keep .codex as a link. Neither is
    # bound read-only (state_paths binds existing directories, by their real path), nor
    # was it watched (it existed): on sec7 a command replaced it by a directory holding
    # config.toml, and it stayed, nothing said.
    project = home / "project"
    (project / ".codex").rmdir()
    (project / "elsewhere").mkdir()
    if left == "file":
        (project / ".codex").write_text("")
    else:
        (project / ".codex").symlink_to("elsewhere" if left == "link" else "missing")
    async with sandboxed(project) as shell:
        # The positive control: a command that leaves it alone leaves it, and says nothing.
        quiet = await shell.exec_command({"cmd": "echo y > ordinary", "login": False, "yield_time_ms": 30000})
        assert quiet["output"] == "" and os.path.lexists(project / ".codex")
        assert (project / ".codex").is_symlink() == (left != "file")
        result = await shell.exec_command({"cmd": f"rm .codex && {PLANT.format(path='.codex')}", "login": False,
                                           "yield_time_ms": 30000})
    output = str(result["output"])
    assert output.startswith("planted\n"), output
    assert not os.path.lexists(project / ".codex"), output
    assert f"{project}/.codex was created while the command ran; moved to {project}/.codex{MOVED_SUFFIX}" in output
    assert (project / f".codex{MOVED_SUFFIX}" / "config.toml").exists()


async def test_codex_home_a_command_creates_in_a_home_workspace_is_moved_aside(home: Path) -> None:
    # With the workspace at $HOME, ~/.codex is codex's home and this project's .codex at
    # once: a config.toml planted there runs MCP servers at the user's next codex (its
    # auth.json would sign trio-agent in as another account). trio-agent never creates
    # it (it only rewrites an existing auth.json): on sec7 it was reported and left.
    (home / ".codex" / "sessions").rmdir()
    (home / ".codex").rmdir()
    async with sandboxed(home) as shell:
        result = await shell.exec_command({"cmd": PLANT.format(path=".codex"), "login": False,
                                           "yield_time_ms": 30000})
    output = str(result["output"])
    assert f"[sandbox] {home}/.codex was created while the command ran; moved to {home}/.codex{MOVED_SUFFIX}" \
        in output, output
    assert not (home / ".codex").exists()


async def test_a_home_deeper_in_the_workspace_is_only_reported(
    home: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The workspace holds $HOME below its top (it is /home): a command could swap the
    # home for a link to elsewhere, where moving ".codex" aside would rename another
    # one, outside the roots. So there codex's home created by a command is only said.
    outside = tmp_path_factory.mktemp("outside")
    (outside / ".codex").mkdir()
    (home / ".codex" / "sessions").rmdir()
    (home / ".codex").rmdir()
    async with sandboxed(home.parent) as shell:
        result = await shell.exec_command({"cmd": f"mv home home.old && ln -s {outside} home && echo swapped",
                                           "login": False, "yield_time_ms": 30000})
    output = str(result["output"])
    assert output.startswith("swapped\n"), output
    assert f"[sandbox] {home}/.codex was created while the command ran (an agent's home: left in place)" in output
    assert (outside / ".codex").is_dir() and not (outside / f".codex{MOVED_SUFFIX}").exists()
