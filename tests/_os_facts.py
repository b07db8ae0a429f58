"""Waiting for facts outside this process (the process table, files written by a child).

Trio cannot be notified when an unrelated process dies or a child writes a file, so
these helpers poll the OS with a small interval and a hard bound. They never wait
for our own code to make progress: that is always synchronised with Trio primitives.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import trio

OS_POLL_INTERVAL = 0.01
OS_FACT_TIMEOUT = 5.0


async def wait_for_os_fact(check: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(OS_FACT_TIMEOUT):
        while not check():  # noqa: ASYNC110 - an OS fact cannot set a trio.Event
            await trio.sleep(OS_POLL_INTERVAL)
        return
    pytest.fail(f"{what} did not happen within {OS_FACT_TIMEOUT} s")


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/status") as status:
            return "\nState:\tZ" not in status.read()
    except (FileNotFoundError, ProcessLookupError):
        return False


async def wait_gone(pids: list[int]) -> None:
    await wait_for_os_fact(lambda: not any(pid_alive(pid) for pid in pids), f"exit of processes {pids}")


def processes_in(directory: object) -> list[int]:
    """Live (non-zombie) processes whose working directory is ``directory`` -- every
    command a test's agent starts runs there, so any left over is an orphan."""
    target = os.path.realpath(str(directory))
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if cwd == target and pid_alive(int(entry)):
            found.append(int(entry))
    return found


async def wait_no_processes_in(directory: object) -> None:
    await wait_for_os_fact(lambda: not processes_in(directory), f"every process in {directory} exiting")
