"""A file under ``/run`` that a sandboxed command could not read on the host stays
unreadable in the rebuilt ``/run`` (sec8's review of sec7's copies).

sec7 copies each small regular file of a rebuilt directory into the sandbox: the agent
reads it and ``bwrap`` writes the copy, owned by the sandbox's user, with the file's
mode. As root the agent reads every file (``CAP_DAC_OVERRIDE``), while its commands
run without capabilities: another user's private file (mode 0600, a service's lock
or state file) became root's own in the sandbox, and readable -- bound back as it is,
it answers "Permission denied" to a root without capabilities. Now a file is copied
only when the command could read it anyway (its owner's, group's or others' read
bit, as they apply to the agent's user); the others are bound as they are.

Real ``bwrap``, both confined modes: in another user's directory under ``/run`` and in
root's (both rebuilt: they hold a socket). Positive controls: the readable file
beside is read, and outside the sandbox the private one is.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta

from .test_sandbox_escapes import MODES, run, run_plant, sandboxed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="another user's files need root (CI runs as root)")

NOBODY = 65534


@pytest.fixture(scope="session")
def private() -> Iterator[dict[str, Path]]:
    """Directories under /run for the whole run (run_plant), each with a socket, a file of
    uid 65534's private to it, and a readable one: ``others`` belongs to uid 65534,
    ``roots`` to root."""
    places = {kind: run_plant(f"private-{kind}", 0o755) for kind in ("others", "roots")}
    listeners = []
    for place in places.values():
        (place / "state").write_text("PRIVATE\n")
        (place / "svc.pid").write_text("4242\n")
        os.chmod(place / "state", 0o600)
        for name in ("state", "svc.pid"):
            os.chown(place / name, NOBODY, NOBODY)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(place / "sock"))
        listeners.append(listener)
    os.chown(places["others"], NOBODY, NOBODY)
    try:
        yield places
    finally:
        for listener in listeners:
            listener.close()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("kind", ["others", "roots"])
async def test_a_file_the_command_could_not_read_stays_unreadable(
    nursery: trio.Nursery, workspace: Path, mode: ta.SandboxMode, kind: str, private: dict[str, Path]
) -> None:
    # On sec7: PRIVATE (a root-owned copy of it).
    place = private[kind]
    async with sandboxed(nursery, workspace, mode) as shell:
        assert await run(shell, f"cat {place}/svc.pid") == "4242\n"  # the positive control: a readable one
        assert await run(shell, f"cat {place}/state 2>&1 || true") == f"cat: {place}/state: Permission denied\n"
        assert await run(shell, f"cat {place}/state", outside_sandbox=True) == "PRIVATE\n"
