"""What the sandbox's command line hides of the host (``_sandbox_hide``, issue 21), and
the order that makes it hold: a hidden directory is made read-only only once what it
must show is bound into it, and the daemon's directory is masked after the writable
binds, so that a workspace holding it does not show it again."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._sandbox import bwrap_argv, release_fds, resolve_sandbox
from trio_agent._tools.exec_command import ShellSessions

WRITE = ta.Sandbox()
READ = ta.Sandbox(ta.SandboxMode.READ_ONLY)


def joined(sandbox: ta.Sandbox, workspace: Path, environ: dict[str, str], private: Path = Path("/private")) -> str:
    # workspace-write always has its private /tmp (ShellSessions): the host's is not shown
    argv = bwrap_argv("bwrap", sandbox, workspace, workspace, private, ["true"], environ)
    release_fds(argv)  # only read: the descriptors of the rebuilt /run are not passed
    return " ".join(argv)


def positions(line: str, *parts: str) -> list[int]:
    found = [line.index(part) for part in parts]
    assert found == sorted(found), line
    return found


def test_the_kernels_knobs_are_bound_read_only_and_its_secrets_masked(tmp_path: Path) -> None:
    line = joined(WRITE, tmp_path, {})
    positions(line, "--proc /proc", "--ro-bind /proc/sys /proc/sys", f"--bind {tmp_path} {tmp_path}")
    if os.path.exists("/proc/keys"):
        assert "--ro-bind /dev/null /proc/keys" in line
    assert "/proc/self" not in line and f"/proc/{os.getpid()} " not in line  # a process's own files stay its own


def test_the_daemons_directory_is_masked_after_the_workspace_that_holds_it(tmp_path: Path) -> None:
    directory = tmp_path / "run" / "daemon"  # missing: created as the daemon creates it
    line = joined(WRITE, tmp_path, {"TRIO_AGENT_DAEMON_DIR": str(directory)}, Path("/private"))
    positions(line, f"--bind {tmp_path} {tmp_path}", f"--tmpfs {directory} --remount-ro {directory}")
    assert directory.is_dir() and directory.stat().st_mode & 0o777 == 0o700


def test_a_runtime_directory_is_emptied_and_made_read_only_after_the_binds_into_it(tmp_path: Path) -> None:
    runtime = tmp_path / "xdg"
    workspace = runtime / "project"  # a workspace below it is bound back
    workspace.mkdir(parents=True)
    line = joined(WRITE, workspace, {"XDG_RUNTIME_DIR": str(runtime)})
    positions(line, f"--tmpfs {runtime}", f"--bind {workspace} {workspace}", f"--remount-ro {runtime}")
    # Its daemon directory lies inside the emptied directory: nothing to mask, nothing created.
    assert f"{runtime}/trio-agent" not in line and not (runtime / "trio-agent").exists()


def test_read_only_empties_tmp_and_binds_the_workspace_back(tmp_path: Path) -> None:
    assert tmp_path.is_relative_to("/tmp")
    line = joined(READ, tmp_path, {})
    positions(line, "--tmpfs /tmp", f"--ro-bind {tmp_path} {tmp_path}", "--remount-ro /tmp")
    assert "--bind " not in line
    # Outside /tmp, nothing is bound back (the host shows through the read-only root).
    assert "--ro-bind /var/tmp" not in joined(READ, Path("/var/tmp"), {})


def test_the_ssh_agents_private_directory_is_masked_else_the_socket_alone(tmp_path: Path) -> None:
    ssh = Path(os.path.realpath("/var/tmp")) / f"trio-agent-ssh-{os.getpid()}"
    ssh.mkdir(mode=0o700)
    try:
        agent = ssh / "agent.1"
        agent.touch()
        assert f"--tmpfs {ssh} --remount-ro {ssh}" in joined(WRITE, tmp_path, {"SSH_AUTH_SOCK": str(agent)})
        ssh.chmod(0o755)
        line = joined(WRITE, tmp_path, {"SSH_AUTH_SOCK": str(agent)})
        assert f"--ro-bind /dev/null {agent}" in line and f"--tmpfs {ssh}" not in line
    finally:
        for entry in ssh.iterdir():
            entry.unlink()
        ssh.rmdir()


async def test_a_daemon_directory_inside_the_workspace_is_empty_and_read_only_in_the_sandbox(
    nursery: trio.Nursery, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = workspace / ".daemon"
    directory.mkdir(mode=0o700)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(directory / "daemon.sock"))
    server.listen(1)
    monkeypatch.setenv("TRIO_AGENT_DAEMON_DIR", str(directory))
    shell = ShellSessions(nursery, workspace, sandbox=resolve_sandbox(WRITE).confinement)
    try:
        cmd = (f"ls -A {directory}; {{ : > {directory}/x; }} 2>/dev/null || echo read-only; "
               "echo written > beside.txt && cat beside.txt")
        result = await shell.exec_command({"cmd": cmd, "login": False})
        assert result["output"] == "read-only\nwritten\n", result
        outside = await shell.exec_command({"cmd": f"ls -A {directory}", "login": False}, outside_sandbox=True)
        assert outside["output"] == "daemon.sock\n"
    finally:
        await shell.aclose()
        server.close()


def test_the_agents_installation_under_tmp_is_bound_back_read_only_before_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A virtualenv or checkout under /tmp (as CI clones are): the agent's Python and
    # trio-agent stay usable in commands. Bound before the writable binds, so that a
    # checkout that is its own workspace stays writable; /tmp itself is never bound back.
    from trio_agent._tools import _sandbox_hide

    checkout = tmp_path / "checkout"
    (checkout / ".venv").mkdir(parents=True)
    monkeypatch.setattr(_sandbox_hide, "_installation", lambda: (str(checkout / ".venv"), str(checkout), "/tmp"))
    line = joined(WRITE, checkout, {})
    positions(line, "--bind /private /tmp", f"--ro-bind {checkout}/.venv {checkout}/.venv",
              f"--ro-bind {checkout} {checkout}", f"--bind {checkout} {checkout}")
    assert "--ro-bind /tmp /tmp" not in line
    read_only = joined(READ, tmp_path / "elsewhere", {})
    positions(read_only, "--tmpfs /tmp", f"--ro-bind {checkout}/.venv {checkout}/.venv", "--remount-ro /tmp")
    # Outside a hidden root nothing is bound back: the read-only root shows it already.
    monkeypatch.setattr(_sandbox_hide, "_installation", lambda: ("/usr",))
    assert "--ro-bind /usr /usr" not in joined(READ, tmp_path, {})


@pytest.mark.parametrize("sandbox", [WRITE, READ], ids=["workspace-write", "read-only"])
async def test_the_agents_installation_under_tmp_is_visible_and_read_only_in_the_sandbox(
    nursery: trio.Nursery, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: ta.Sandbox
) -> None:
    from trio_agent._tools import _sandbox_hide

    install = tmp_path / "venv"
    install.mkdir()
    (install / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "neighbour.txt").write_text("not shown\n")
    monkeypatch.setattr(_sandbox_hide, "_installation", lambda: (str(install),))
    shell = ShellSessions(nursery, workspace, sandbox=resolve_sandbox(sandbox).confinement)
    try:
        cmd = (f"cat {install}/pyvenv.cfg; {{ : > {install}/x; }} 2>/dev/null || echo read-only; "
               f"cat {tmp_path}/neighbour.txt 2>/dev/null || echo hidden")
        result = await shell.exec_command({"cmd": cmd, "login": False})
        assert result["output"] == "home = /usr/bin\nread-only\nhidden\n", result
    finally:
        await shell.aclose()
