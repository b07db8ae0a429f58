"""What the user's login shell prints while it starts stays out of a command's output,
while what it sets up (exported variables, ``PATH``) reaches the command (issue 24 item
5, ``_tools/_login_env``): without a sandbox and in both Bubblewrap modes, with bash's
``.bash_profile`` and sh's ``.profile``, a profile that cannot write its cache in the
sandbox (pyenv's rehash), and the fallback to a login shell per command -- one warning
-- when the profile hangs or exits non-zero.

The fake ``HOME`` lies under ``/var/tmp``: a sandbox hides or replaces ``/tmp``, and the
profile must be readable (and not writable) inside it. Every test asserts by pid that
nothing the profile started is left. Nothing here cancels a login shell while it starts
but the test of exactly that (whose profile holds no lock).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._login_env import SHELL_OWN_VARIABLES, parse_snapshot, snapshot_argv
from trio_agent._tools._sandbox import Confinement
from trio_agent._tools.exec_command import ShellSessions

from .._os_facts import processes_in, wait_for_os_fact, wait_gone
from .test_sandbox import confinement, host_pids, sleeper

NOISE_OUT = "profile-noise-on-stdout"
NOISE_ERR = "profile-noise-on-stderr"
REHASH = "fake-pyenv: cannot rehash: shims isn't writable"
#: Prints the variable the profile exports, runs the tool it put on PATH, and writes to
#: stderr itself (a command's own stderr is still part of its output).
PROBE = "echo var=$PROFILE_VAR; profile-tool; echo command-stderr >&2"
EXPECTED = "var=from-the-profile\nprofile-tool ran\ncommand-stderr\n"
MODES = [None, ta.SandboxMode.READ_ONLY, ta.SandboxMode.WORKSPACE_WRITE]
SHELLS = [("/bin/bash", ".bash_profile"), ("/bin/sh", ".profile")]


@pytest.fixture
def home() -> Iterator[Path]:
    """A fake ``HOME`` outside ``/tmp``, with ``bin/profile-tool`` for the profile's PATH."""
    path = Path(tempfile.mkdtemp(prefix="trio-agent-home-", dir="/var/tmp"))
    (path / "bin").mkdir()
    tool = path / "bin" / "profile-tool"
    tool.write_text("#!/bin/sh\necho profile-tool ran\n")
    tool.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def noisy_profile(home: Path, background: str, extra: str = "") -> str:
    """A profile that prints on both streams, tries to write a cache below ``HOME``
    (as pyenv's rehash does) and says so on stderr when it cannot, leaves a process
    running in the background (an agent of some kind), exports a variable and puts
    ``HOME/bin`` first on ``PATH``."""
    return (
        f"{extra}"
        f"echo {NOISE_OUT}\n"
        f"echo {NOISE_ERR} >&2\n"
        f'if ! mkdir -p "$HOME/shims" 2>/dev/null || ! : > "$HOME/shims/.lock" 2>/dev/null; then\n'
        f'  echo "{REHASH}" >&2\n'
        "fi\n"
        f"sleep {background} </dev/null >/dev/null 2>&1 &\n"
        "export PROFILE_VAR=from-the-profile\n"
        f'export PATH="{home}/bin:$PATH"\n'
    )


def sandbox(mode: ta.SandboxMode | None) -> Confinement | None:
    return None if mode is None else confinement(mode)


class Warnings(list[str]):
    def __call__(self, message: str) -> None:
        self.append(message)


# -- the noise stays out, the environment comes in --------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "no-sandbox" if m is None else m.value)
@pytest.mark.parametrize(("shell", "profile"), SHELLS, ids=["bash", "sh"])
async def test_profile_output_is_not_in_the_output_but_its_environment_is(
    nursery: trio.Nursery, workspace: Path, home: Path, mode: ta.SandboxMode | None, shell: str, profile: str
) -> None:
    background = sleeper()
    (home / profile).write_text(noisy_profile(home, background))
    warned = Warnings()
    sessions = ShellSessions(nursery, workspace, {"HOME": str(home)}, sandbox=sandbox(mode), on_warning=warned)
    try:
        first = await sessions.exec_command({"cmd": PROBE, "shell": shell})
        again = await sessions.exec_command({"cmd": PROBE, "shell": shell})
        plain = await sessions.exec_command({"cmd": "echo ${PROFILE_VAR:-unset}", "shell": shell, "login": False})
    finally:
        await sessions.aclose()
    assert (first["exit_code"], first["output"]) == (0, EXPECTED)
    assert (again["exit_code"], again["output"]) == (0, EXPECTED)
    assert plain["output"] == "unset\n"  # login: false -> the agent's environment, no profile
    assert warned == []
    # The profile really ran where the command runs: in a sandbox it could not write HOME.
    assert (home / "shims" / ".lock").exists() is (mode is None)
    assert host_pids(background) == [] and processes_in(workspace) == []


async def test_a_profile_that_cannot_write_its_cache_in_the_sandbox_is_silent(
    nursery: trio.Nursery, workspace: Path, home: Path
) -> None:
    # pyenv's rehash, literally: the shims directory exists but is read-only in the sandbox.
    (home / "shims").mkdir()
    (home / ".bash_profile").write_text(
        'if ! touch "$HOME/shims/.pyenv-shim" 2>/dev/null; then\n'
        '  echo "pyenv: cannot rehash: $HOME/shims isn\'t writable" >&2\n'
        "fi\n"
        'export PYENV_ROOT="$HOME"\n'
        'export PATH="$HOME/bin:$PATH"\n'
    )
    sessions = ShellSessions(nursery, workspace, {"HOME": str(home)}, sandbox=confinement())
    try:
        result = await sessions.exec_command({"cmd": "echo root=$PYENV_ROOT; command -v profile-tool",
                                              "shell": "/bin/bash"})
        wrote = await sessions.exec_command({"cmd": "touch made-here && echo wrote", "shell": "/bin/bash"})
    finally:
        await sessions.aclose()
    assert result["output"] == f"root={home}\n{home}/bin/profile-tool\n"
    assert "cannot rehash" not in result["output"]
    assert not (home / "shims" / ".pyenv-shim").exists()  # the profile's write really failed
    assert wrote["output"] == "wrote\n" and (workspace / "made-here").exists()  # the workspace is writable
    assert processes_in(workspace) == []


async def test_credentials_the_profile_exports_are_scrubbed_like_the_agents(
    nursery: trio.Nursery, workspace: Path, home: Path
) -> None:
    token = "ghp_profile_exported_0123456789"
    (home / ".bash_profile").write_text(f"export GITHUB_TOKEN={token}\nexport PROFILE_VAR=kept\n")
    overrides = {"HOME": str(home), "DEPLOY_API_KEY": "given-by-the-caller-1234"}
    sessions = ShellSessions(nursery, workspace, overrides)
    try:
        result = await sessions.exec_command({
            "cmd": 'echo "${GITHUB_TOKEN:-no token} $PROFILE_VAR $DEPLOY_API_KEY"; cat "$HOME/.bash_profile"',
            "shell": "/bin/bash",
        })
    finally:
        await sessions.aclose()
    lines = result["output"].splitlines()
    assert lines[0] == "no token kept given-by-the-caller-1234"  # overrides are neither scrubbed nor redacted
    assert lines[1] == "export GITHUB_TOKEN=[REDACTED]"  # found another way: redacted
    assert token not in result["output"]


# -- the snapshot is never cut short by its caller ----------------------------------------------


async def test_cancelling_the_first_command_does_not_cancel_the_login_shell_starting(
    nursery: trio.Nursery, workspace: Path, home: Path
) -> None:
    # The profile waits for a file only this test creates; the command waiting for it
    # is cancelled meanwhile. The login shell still runs its profile to the end, once.
    (home / ".bash_profile").write_text(
        'echo run >> "$HOME/runs"\n'
        'echo $$ > "$HOME/started"\n'
        'while [ ! -e "$HOME/go" ]; do sleep 0.01; done\n'
        'echo yes > "$HOME/finished"\n'
        "export PROFILE_VAR=from-the-profile\n"
    )
    sessions = ShellSessions(nursery, workspace, {"HOME": str(home)})
    try:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as calls:
                calls.start_soon(sessions.exec_command, {"cmd": "echo never", "shell": "/bin/bash"})
                await wait_for_os_fact(lambda: (home / "started").exists(), "the profile starting")
                shell_pid = int((home / "started").read_text())
                scope.cancel()  # the call waiting for its login shell is cancelled...
                (home / "go").touch()  # ...before that shell's profile can finish
        assert scope.cancelled_caught
        assert (home / "finished").exists(), "the login shell was killed while it started"
        await wait_gone([shell_pid])
        later = await sessions.exec_command({"cmd": "echo var=$PROFILE_VAR", "shell": "/bin/bash"})
    finally:
        await sessions.aclose()
    assert later["output"] == "var=from-the-profile\n"
    assert (home / "runs").read_text() == "run\n"  # the snapshot was kept: the profile ran once
    assert processes_in(workspace) == []


# -- the fallback: a login shell per command, one warning -------------------------------------


async def test_a_profile_that_hangs_falls_back_to_a_login_shell_per_command_with_one_warning(
    nursery: trio.Nursery, workspace: Path, home: Path
) -> None:
    # The first login shell hangs in its profile (a stalled network mount, say); the
    # snapshot gives up after login_timeout, its whole tree is ended, and the commands
    # run as login shells, as before the snapshot existed.
    hanging = sleeper()
    (home / ".bash_profile").write_text(
        'if [ ! -e "$HOME/hung-once" ]; then\n'
        '  : > "$HOME/hung-once"\n'
        '  echo $$ > "$HOME/hung.pid"\n'
        f"  sleep {hanging}\n"
        "fi\n"
        "echo still-noisy\n"
        "export PROFILE_VAR=from-the-profile\n"
    )
    warned = Warnings()
    sessions = ShellSessions(nursery, workspace, {"HOME": str(home)}, login_timeout=1.0, on_warning=warned)
    try:
        first = await sessions.exec_command({"cmd": "echo var=$PROFILE_VAR", "shell": "/bin/bash"})
        second = await sessions.exec_command({"cmd": "echo var=$PROFILE_VAR", "shell": "/bin/bash"})
    finally:
        await sessions.aclose()
    assert first["output"] == second["output"] == "still-noisy\nvar=from-the-profile\n"  # today's behaviour
    assert len(warned) == 1, warned
    assert "/bin/bash -l did not finish starting within 1 s" in warned[0]
    assert "commands run in a login shell each" in warned[0]
    await wait_gone([int((home / "hung.pid").read_text())])
    assert host_pids(hanging) == [] and processes_in(workspace) == []


@pytest.mark.parametrize("mode", [None, ta.SandboxMode.WORKSPACE_WRITE], ids=["no-sandbox", "workspace-write"])
async def test_a_profile_that_exits_non_zero_falls_back_with_one_warning(
    nursery: trio.Nursery, workspace: Path, home: Path, mode: ta.SandboxMode | None
) -> None:
    # The profile's state lives in the workspace: writable in both setups.
    (home / ".bash_profile").write_text(
        f'if [ ! -e "{workspace}/failed-once" ]; then : > "{workspace}/failed-once"; exit 7; fi\n'
        "echo still-noisy >&2\n"
        "export PROFILE_VAR=from-the-profile\n"
    )
    warned = Warnings()
    sessions = ShellSessions(nursery, workspace, {"HOME": str(home)}, sandbox=sandbox(mode), on_warning=warned)
    try:
        results = [await sessions.exec_command({"cmd": "echo var=$PROFILE_VAR", "shell": "/bin/bash"})
                   for _ in range(2)]
    finally:
        await sessions.aclose()
    assert [r["output"] for r in results] == ["still-noisy\nvar=from-the-profile\n"] * 2
    assert len(warned) == 1, warned
    assert "/bin/bash -l exited with status 7 before it reported its environment" in warned[0]
    assert processes_in(workspace) == []


async def test_without_a_callback_the_fallback_is_one_runtime_warning(
    nursery: trio.Nursery, workspace: Path, home: Path
) -> None:
    (home / ".bash_profile").write_text("exit 0\n")  # a profile that ends the shell before the command
    sessions = ShellSessions(nursery, workspace, {"HOME": str(home)})
    try:
        with pytest.warns(RuntimeWarning, match="did not report its environment") as caught:
            for _ in range(2):
                await sessions.exec_command({"cmd": "echo unreachable", "shell": "/bin/bash"})
    finally:
        await sessions.aclose()
    assert len(caught) == 1


# -- parsing what the login shell printed -----------------------------------------------------


def test_the_snapshot_is_what_follows_the_marker_minus_the_shells_own_variables() -> None:
    marker = b"trio-agent-login-environment:abc\n"
    env = b"A=1\0MULTI=line one\nline=two\0PWD=/x\0SHLVL=2\0_=/usr/bin/env\0OLDPWD=/\0"
    assert parse_snapshot(b"noise\0A=0\0" + marker + env, "abc") == {"A": "1", "MULTI": "line one\nline=two"}
    assert {"PWD", "OLDPWD", "SHLVL", "_"} == SHELL_OWN_VARIABLES


@pytest.mark.parametrize(
    "output",
    [b"", b"A=1\0", b"trio-agent-login-environment:other\nA=1\0", b"trio-agent-login-environment:abc\nA=1",
     b"trio-agent-login-environment:abc\nno-equals\0", b"trio-agent-login-environment:abc\n=1\0",
     b"trio-agent-login-environment:abc\n"],
    ids=["empty", "no-marker", "another-marker", "cut-short", "no-equals", "no-name", "nothing-after"],
)
def test_anything_but_a_complete_listing_after_the_marker_is_no_snapshot(output: bytes) -> None:
    assert parse_snapshot(output, "abc") is None


def test_the_script_does_not_contain_its_own_marker() -> None:
    # A profile may echo the command line ($BASH_EXECUTION_STRING): that must not look
    # like the marker.
    argv = snapshot_argv("/bin/bash", "abc")
    assert argv[:2] == ["/bin/bash", "-lc"]
    assert "trio-agent-login-environment:abc" not in argv[2]
