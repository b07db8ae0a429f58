"""The kernel's knobs are out of a sandboxed command's reach, whatever its uid (issue 21,
hole 3).

As root, Bubblewrap makes no user namespace, and uid 0 passes the owner checks of
``/proc/sys`` (``kernel/core_pattern``: a ``|prog`` is host-root code execution on the
next crash) and of ``/proc``'s other global files; dropped capabilities do not stop
those writes. Nothing here writes a knob: each is opened for writing and closed
without a byte written, which is what the sandbox must refuse (``EROFS`` or ``EACCES``)
and what the same process may do outside it (the positive control, as root). As an
unprivileged user (uid 65534 via ``setpriv``) Bubblewrap adds a user namespace: the
same sandbox must still start, run and mask.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._sandbox import Confinement, argv_fds, release_fds, resolve_sandbox
from trio_agent._tools.exec_command import ShellSessions

#: Knobs a command must not open for writing (those this kernel has).
KNOBS = [path for path in (
    "/proc/sys/vm/swappiness", "/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern",
    "/proc/sys/net/ipv4/ip_forward", "/proc/sysrq-trigger", "/proc/mtrr", "/proc/irq/default_smp_affinity",
    "/sys/kernel/mm/transparent_hugepage/enabled",
) if os.path.exists(path)]
#: Knobs whose opening for writing (nothing written) outside the sandbox is harmless: the control.
CONTROL_KNOBS = ["/proc/sys/vm/swappiness", "/proc/sys/kernel/hostname"]
#: Read-only secrets masked as container runtimes mask them (those this kernel has).
MASKED = [path for path in ("/proc/keys", "/proc/timer_list", "/proc/kcore", "/proc/sched_debug")
          if os.path.exists(path)]
MODES = [ta.SandboxMode.WORKSPACE_WRITE, ta.SandboxMode.READ_ONLY]

# Run inside the sandbox (by the sandbox's own python3): what opening each path for
# writing and reading gives, as JSON.
PROBE = """
import errno, json, os, sys
def attempt(path, flags):
    try:
        os.close(os.open(path, flags))
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
knobs, masked = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({
    "uid": os.getuid(),
    "write": {path: attempt(path, os.O_WRONLY) for path in knobs},
    "own": attempt("/proc/self/oom_score_adj", os.O_WRONLY),
    "masked": {path: open(path, "rb").read(64) != b"" if attempt(path, os.O_RDONLY) == "ok" else False
               for path in masked},
    "acpi": sorted(os.listdir("/proc/acpi")) if os.path.isdir("/proc/acpi") else [],
    "firmware": sorted(os.listdir("/sys/firmware")) if os.path.isdir("/sys/firmware") else [],
    "swappiness": open("/proc/sys/vm/swappiness").read(),
}))
"""


def probe_argv(python: str) -> list[str]:
    return [python, "-c", PROBE, json.dumps(KNOBS), json.dumps(MASKED)]


def assert_confined(found: dict[str, object]) -> None:
    assert KNOBS and all(path in found["write"] for path in KNOBS)  # type: ignore[operator]
    refused = {path: result for path, result in found["write"].items()  # type: ignore[attr-defined]
               if result in ("EROFS", "EACCES")}
    assert refused == found["write"]
    assert found["own"] == "ok"  # the command's own processes' knobs stay its own
    assert found["masked"] == dict.fromkeys(MASKED, False)  # unreadable or empty
    assert found["acpi"] == [] and found["firmware"] == []
    with open("/proc/sys/vm/swappiness") as host:
        assert found["swappiness"] == host.read()  # reading a knob still works


def confinement(mode: ta.SandboxMode) -> Confinement:
    return resolve_sandbox(ta.Sandbox(mode)).confinement


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
async def test_root_cannot_open_a_kernel_knob_for_writing_in_the_sandbox(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode
) -> None:
    assert os.geteuid() == 0, "CI runs as root: the case the hole is about (see the setpriv test for the other)"
    for path in CONTROL_KNOBS:  # outside, root may: that is what the sandbox takes away
        os.close(os.open(path, os.O_WRONLY))
    with open(MASKED[0], "rb") as secret:
        assert secret.read(64)
    shell = ShellSessions(nursery, workspace, sandbox=confinement(mode))
    try:
        cmd = shlex.join(probe_argv(sys.executable))
        result = await shell.exec_command({"cmd": cmd, "login": False, "yield_time_ms": 30000})
        assert result["exit_code"] == 0, result
        found = json.loads(str(result["output"]))
        assert found["uid"] == 0
        assert_confined(found)
    finally:
        await shell.aclose()


@pytest.fixture
def nobody_dirs() -> Iterator[tuple[Path, Path]]:
    """A workspace and a private /tmp that uid 65534 owns (below /var/tmp: pytest's
    tmp_path is root's, mode 0700)."""
    made = [Path(tempfile.mkdtemp(prefix="trio-agent-nobody-", dir="/var/tmp")) for _ in range(2)]
    for path in made:
        os.chown(path, 65534, 65534)
    try:
        yield made[0], made[1]
    finally:
        for path in made:
            shutil.rmtree(path)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_an_unprivileged_agents_sandbox_starts_and_confines_the_same(
    nobody_dirs: tuple[Path, Path], mode: ta.SandboxMode
) -> None:
    # The command line the agent builds, run as uid 65534: bwrap then makes a user
    # namespace, where the binds and masks over /proc must work too.
    workspace, private_tmp = nobody_dirs
    python = shutil.which("python3", path="/usr/bin:/bin")  # ours is under /root, closed to 65534
    assert python is not None
    writes = "echo ok > written && cat written && " if mode is ta.SandboxMode.WORKSPACE_WRITE else ""
    argv = confinement(mode).wrap(
        ["/bin/sh", "-c", f"{writes}exec \"$@\"", "sh", *probe_argv(python)], workspace, workspace,
        private_tmp if mode is ta.SandboxMode.WORKSPACE_WRITE else None)
    try:
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
                              capture_output=True, text=True, timeout=60, check=False, pass_fds=argv_fds(argv))
    finally:
        release_fds(argv)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if writes:
        assert lines[0] == "ok" and (workspace / "written").read_text() == "ok\n"  # it does work
    found = json.loads(lines[-1])
    assert found["uid"] == 65534
    assert_confined(found)
