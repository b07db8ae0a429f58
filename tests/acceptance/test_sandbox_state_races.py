"""A ``.codex`` a sandboxed command creates where none was is moved aside whatever the
command does to the names beside it or to its workspace (sec8's review of sec7's
``_sandbox_state``): codex reads a project's ``.codex/config.toml`` (MCP servers, a
model provider: run unconfined).

The ways a command (the model's output) tried to keep its plant in place, each on
sec7 with the plant left and no more than "it could not be moved aside" said, or
nothing at all:

- every name the plant would be moved to made in advance (100 of them on sec7);
- as an unprivileged agent, the workspace made read-only (the rename refused), or
  unsearchable (the plant not even seen).

Real ``bwrap`` (as root; the unprivileged agent's settle is run as uid 65534 in a
child process, the command's effect made as uid 65534 too). Positive controls: the
ordinary writes stay, the plant is moved once, and as uid 65534 a plant in a
workspace left as it was is moved as before.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._tools._sandbox import STATE_NAMES
from trio_agent._tools._sandbox_state import MOVED_SUFFIX, watch_state

from .test_sandbox_state_dirs import PLANT, home, sandboxed

__all__ = ["home"]  # a fixture, used by name

NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="another uid needs root (CI runs as root)")


def plants(project: Path) -> list[str]:
    """What is at ``.codex`` and beside it: the names, and whether ``.codex`` holds the plant."""
    return sorted(name for name in os.listdir(project) if name.startswith(".codex"))


async def test_every_name_made_in_advance_does_not_keep_the_plant(home: Path) -> None:
    # On sec7: the 100 names (.codex.created-by-a-command, -1 .. -99) were all taken, the
    # plant stayed ("it could not be moved aside").
    project = home / "project"
    (project / ".codex").rmdir()
    taken = f"mkdir .codex{MOVED_SUFFIX} && for i in $(seq 1 150); do mkdir .codex{MOVED_SUFFIX}-$i; done"
    async with sandboxed(project) as shell:
        result = await shell.exec_command({"cmd": f"{taken} && {PLANT.format(path='.codex')} && echo x > ordinary",
                                           "login": False, "yield_time_ms": 30000})
    output = str(result["output"])
    assert output.startswith("planted\n"), output
    assert not (project / ".codex").exists(), output
    assert "could not be moved aside" not in output and f"{project}/.codex was created while the command ran; " \
        f"moved to {project}/.codex{MOVED_SUFFIX}" in output
    moved = [name for name in plants(project) if (project / name / "config.toml").exists()]
    assert len(moved) == 1 and (project / "ordinary").read_text() == "x\n"  # moved once; the rest stays


def settle_as_nobody(project: Path, command: str) -> tuple[str | None, list[str], int]:
    """The watch of a command in ``project`` taken as uid 65534, ``command``'s effect on the
    host made (as uid 65534, as the command would), then settled as uid 65534 in a
    child: its note, what is at ``.codex`` and beside it, and the workspace's mode then."""
    watching, watching_w = os.pipe()
    go, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(watching)
            os.close(go_w)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            watch = watch_state(ta.Sandbox(ta.SandboxMode.WORKSPACE_WRITE), project, STATE_NAMES, [])
            assert watch is not None
            os.write(watching_w, b"watching\n")
            os.read(go, 1)  # the command has run
            os.write(watching_w, (watch.settle() or "").encode())
            code = 0
        finally:
            os._exit(code)
    os.close(watching_w)
    os.close(go)
    with os.fdopen(watching, "rb") as reader, os.fdopen(go_w, "wb") as goer:
        assert reader.readline() == b"watching\n"
        subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/bin/sh", "-c",
                        command], cwd=project, check=True)
        goer.write(b"g")
        goer.flush()
        note = reader.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    mode = stat.S_IMODE(project.stat().st_mode)
    os.chmod(project, 0o755)
    return note or None, plants(project), mode


@pytest.fixture
def nobodys() -> Iterator[Path]:
    """A workspace of uid 65534's, below a directory it may enter (not pytest's 0700 one)."""
    base = Path(tempfile.mkdtemp(prefix="trio-agent-state-", dir="/var/tmp"))
    base.chmod(0o755)
    project = base / "project"
    project.mkdir()
    os.chown(project, NOBODY, NOBODY)
    try:
        yield project
    finally:
        project.chmod(0o755)
        shutil.rmtree(base)


@ROOT_ONLY
@pytest.mark.parametrize("mode", ["555", "000", "444"])
def test_as_an_unprivileged_agent_a_workspace_made_read_only_does_not_keep_the_plant(
    nobodys: Path, mode: str
) -> None:
    # On sec7: 555 -> "it could not be moved aside" (EACCES), 000 -> nothing said (lexists
    # is False in a directory the agent cannot search), the plant left in both.
    project = nobodys
    note, seen, left = settle_as_nobody(project, f"mkdir .codex && echo x > .codex/config.toml && chmod {mode} .")
    assert seen == [f".codex{MOVED_SUFFIX}"], (note, seen)
    assert note is not None and "moved to" in note, note
    assert left == int(mode, 8)  # the mode the command left is put back once the plant is moved


@ROOT_ONLY
def test_as_an_unprivileged_agent_a_plant_is_still_moved_aside(nobodys: Path) -> None:
    # The positive control of the above: the workspace left as it was.
    project = nobodys
    note, seen, left = settle_as_nobody(project, "mkdir .codex && echo x > .codex/config.toml")
    assert seen == [f".codex{MOVED_SUFFIX}"] and note is not None and "moved to" in note, (note, seen)
    assert left == 0o755
