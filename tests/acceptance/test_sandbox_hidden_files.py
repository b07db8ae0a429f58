"""Paths the agent's process keeps from its sandboxed commands
(``_sandbox_hide.HIDE_VARIABLE``, ``TRIO_AGENT_SANDBOX_HIDE``; ``serve --ws-token-file``
names its token file there): each is masked wherever the sandbox shows it, after the
writable binds that would show it again, and only there. On the command line and in
a real sandbox (positive control: the file beside it stays readable)."""

from __future__ import annotations

import os
from pathlib import Path

import trio

import trio_agent as ta
from trio_agent._tools._sandbox import argv_fds, bwrap_argv, release_fds, resolve_sandbox
from trio_agent._tools._sandbox_hide import HIDE_VARIABLE, hide_from_commands

WRITE = ta.Sandbox()


def line(workspace: Path, environ: dict[str, str], private: Path | None = Path("/private")) -> list[str]:
    argv = bwrap_argv("bwrap", WRITE, workspace, workspace, private, ["true"], environ)
    release_fds(argv)  # only read: the descriptors of the rebuilt /run are not passed
    return argv


def test_a_named_file_is_masked_after_the_workspace_bind_and_a_directory_is_not(tmp_path: Path) -> None:
    secret, folder = tmp_path / "secret", tmp_path / "folder"
    secret.write_text("s")
    folder.mkdir()
    environ: dict[str, str] = {}
    hide_from_commands(str(secret), environ)
    hide_from_commands(str(folder), environ)
    hide_from_commands(str(secret), environ)  # named once
    assert environ[HIDE_VARIABLE] == os.pathsep.join([str(secret), str(folder)])
    argv = " ".join(line(tmp_path, environ))
    assert argv.index(f"--ro-bind /dev/null {secret}") > argv.index(f"--bind {tmp_path} {tmp_path}")
    assert str(folder) not in argv  # files only: a directory's mask could hide what is bound inside it


def test_only_what_the_sandbox_shows_is_masked(tmp_path: Path) -> None:
    workspace = Path(os.path.realpath("/var/tmp")) / f"trio-agent-hidden-{os.getpid()}"
    workspace.mkdir()
    try:
        under_tmp = tmp_path / "secret"  # the host's /tmp: replaced by the private one
        under_tmp.write_text("s")
        named = os.pathsep.join([str(under_tmp), "relative/path", str(tmp_path / "missing"), "/", "/dev/null", ""])
        argv = line(workspace, {HIDE_VARIABLE: named})
        assert str(under_tmp) not in argv and "relative/path" not in argv and str(tmp_path / "missing") not in argv
        assert argv.count("/dev/null") == line(workspace, {}).count("/dev/null")
    finally:
        workspace.rmdir()


async def test_a_named_file_reads_empty_in_the_sandbox_and_the_one_beside_it_does_not(tmp_path: Path) -> None:
    resolution = resolve_sandbox(WRITE)
    assert resolution.confinement.bwrap is not None, resolution.fallback
    secret, beside = tmp_path / "secret", tmp_path / "beside"
    secret.write_text("the token\n")
    beside.write_text("visible\n")
    argv = bwrap_argv(resolution.confinement.bwrap, WRITE, tmp_path, tmp_path, tmp_path / "private-tmp",
                      ["/bin/sh", "-c", f"cat {secret}; echo ---; cat {beside}"], {HIDE_VARIABLE: str(secret)})
    (tmp_path / "private-tmp").mkdir()
    try:
        done = await trio.run_process(argv, capture_stdout=True, pass_fds=argv_fds(argv))
    finally:
        release_fds(argv)
    assert done.stdout == b"---\nvisible\n"
    assert secret.read_text() == "the token\n"
