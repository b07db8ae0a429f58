"""Process-table facts for the exec_command tests, robust to a process exiting mid-read.

(``tests/_os_facts.pid_alive`` lets the ``ProcessLookupError`` that reading
``/proc/<pid>/status`` raises when the process exits during the read escape.)
"""

from __future__ import annotations

import os
from pathlib import Path

from .._os_facts import wait_for_os_fact


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "\nState:\tZ" not in status


async def wait_gone(pids: list[int]) -> None:
    await wait_for_os_fact(lambda: not any(pid_alive(pid) for pid in pids), f"exit of processes {pids}")


def processes_in(directory: object) -> list[int]:
    """Live processes whose working directory is ``directory`` (each test's commands run
    there, so any left over is an orphan)."""
    target = os.path.realpath(str(directory))
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if cwd == target and pid_alive(int(entry)):
                found.append(int(entry))
    return found


async def wait_no_processes_in(directory: object) -> None:
    await wait_for_os_fact(lambda: not processes_in(directory), f"every process in {directory} exiting")
