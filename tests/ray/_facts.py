"""Waiting for facts outside the driver: files a remote tool writes, processes ending.

Another process cannot wake a Trio task, so these poll with a small interval and a
hard bound (as ``tests/_os_facts.py`` does, with a bound that fits actor start-up)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

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


def read_pids(paths: list[Path]) -> list[int]:
    return [int(path.read_text()) for path in paths]


def pids_written(paths: list[Path]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return all(pid_alive(pid) for pid in read_pids(paths))
        except (FileNotFoundError, ValueError):  # not yet, or half written
            return False

    return check


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if pid_alive(pid)]


def kill(pid: int, sig: int) -> None:
    os.kill(pid, sig)
