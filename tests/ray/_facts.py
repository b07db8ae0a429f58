"""Waiting for facts outside the driver: remote tools starting, processes ending.

Another process cannot wake a Trio task, so these poll with a small interval and a
hard bound (as ``tests/_os_facts.py`` does, with a bound that fits actor start-up)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
import trio

from .._os_facts import pid_alive

BOUND = 60.0


async def wait_for(check: Callable[[], bool], what: str, bound: float = BOUND) -> None:
    with trio.move_on_after(bound):
        while not check():  # noqa: ASYNC110 - an OS fact cannot set a trio.Event
            await trio.sleep(0.02)
        return
    pytest.fail(f"{what} did not happen within {bound} s")


def long_tool(marker: int) -> str:
    """A prompt whose tool runs ``sleep 300.<marker>``: a command line unique to it, by
    which the driver finds its process (the sandbox gives every command its own PID
    namespace, so the command cannot report its host pid itself)."""
    return f"run: exec sleep {sleep_argument(marker)}"


def sleep_argument(marker: int) -> str:
    return f"300.{marker:07d}1"


def new_markers(count: int) -> list[int]:
    """Markers no other test (or leftover of one) uses."""
    base = random.randrange(10**6) * 10
    return [base + index for index in range(count)]


def tool_pid(marker: int) -> int | None:
    """The host pid of the live ``long_tool(marker)`` process, if there is one."""
    wanted = f"sleep\0{sleep_argument(marker)}\0".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if cmdline.read() != wanted:
                    continue
        except OSError:
            continue
        if pid_alive(int(entry)):
            return int(entry)
    return None


def tools_running(markers: list[int]) -> Callable[[], bool]:
    return lambda: all(tool_pid(marker) is not None for marker in markers)


def tool_pids(markers: list[int]) -> list[int]:
    pids = [tool_pid(marker) for marker in markers]
    assert None not in pids, f"not every tool of {markers} is running"
    return [pid for pid in pids if pid is not None]


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if pid_alive(pid)]


def kill(pid: int, sig: int) -> None:
    os.kill(pid, sig)
