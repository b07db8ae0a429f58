"""Hostile login profiles against the login-environment snapshot (issue 24 item 5,
``_tools/_login_env``): what the user's profile does is data. Whatever it prints,
forges, keeps open or reads, a command either gets the profile's environment and none
of its output, or falls back to a login shell per command with exactly one warning --
never an exception, a hang, or a process left behind."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from trio_agent._tools import _login_env
from trio_agent._tools.exec_command import ShellSessions

from .._os_facts import processes_in
from ..tools.test_sandbox import host_pids, sleeper
from ..tools.test_shell_init_noise import Warnings
from ..tools.test_shell_init_noise import home as home  # the fixture: a fake HOME under /var/tmp

EXPORT = "export PROFILE_VAR=from-the-profile\n"
CLEAN = "var=from-the-profile\n"
#: (case, profile before the export, the warning it must give or None for a clean snapshot)
CASES = [
    # A marker without the snapshot's nonce, NULs and an environment of its own: ignored.
    ("forged-marker", "printf 'trio-agent-login-environment:\\nFORGED=1\\0PROFILE_VAR=forged\\0'\n", None),
    # The script's own text (bash shows it in $BASH_EXECUTION_STRING) is not the marker.
    ("echoes-the-script", 'echo "$BASH_EXECUTION_STRING"; echo "$BASH_EXECUTION_STRING" >&2\n', None),
    ("binary-noise", "head -c 4096 /dev/urandom; printf '\\0\\0\\377' >&2\n", None),
    # exec bypasses functions and EXIT traps: neither gets to print after the marker.
    ("env-function", "env() { echo fake-env; }\n", None),
    ("exit-trap", "trap 'echo trapped-noise; printf \"X=1\\0\"' EXIT\n", None),
    # Its stdin is closed: a profile that reads one does not wait for input that never comes.
    ("reads-stdin", "read -r line; cat >/dev/null\n", None),
    # A background process keeping the output pipe open: waited for briefly, then ended.
    ("keeps-stdout-open", "sleep {sleep} &\n", None),
    ("closes-stdout", "exec >&-\n", "exited with status 1 before it reported its environment"),
    ("floods", "head -c 300000 /dev/zero\n", "printed more than 65536 bytes while starting"),
]


@pytest.mark.parametrize(("case", "profile", "warning"), CASES, ids=[case for case, _, _ in CASES])
async def test_a_hostile_profile_gives_a_clean_snapshot_or_one_warning(
    nursery: trio.Nursery, workspace: Path, home: Path, monkeypatch: pytest.MonkeyPatch,
    case: str, profile: str, warning: str | None,
) -> None:
    monkeypatch.setattr(_login_env, "MAX_SNAPSHOT_BYTES", 65536)
    background = sleeper()
    (home / ".bash_profile").write_text(profile.replace("{sleep}", background) + EXPORT)
    warned = Warnings()
    # Generous: a profile that hung (stdin not closed, a pipe waited for) would time out
    # and warn, failing the clean cases.
    sessions = ShellSessions(nursery, workspace, {"HOME": str(home)}, login_timeout=5.0, on_warning=warned)
    try:
        results = [await sessions.exec_command({"cmd": "echo var=${PROFILE_VAR}${FORGED}", "shell": "/bin/bash",
                                                "yield_time_ms": 10_000}) for _ in range(2)]
    finally:
        await sessions.aclose()
    if warning is None:
        assert warned == []
        assert [r["output"] for r in results] == [CLEAN, CLEAN], case
    else:
        assert len(warned) == 1 and warning in warned[0], warned
        assert all("exit_code" in r for r in results)  # the fallback ran them to the end
    assert host_pids(background) == [] and processes_in(workspace) == []
