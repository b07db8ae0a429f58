"""The descriptors one command's rebuilt ``/run`` may hold count those the agent's process
already holds (sec8's review of sec7's budget).

sec7 gave each command ``min(FD_ENTRIES, RLIMIT_NOFILE / 4)`` whatever was open: the
descriptors of commands starting at the same time (parallel tool calls) added up, and
another local user's directory under ``/run`` of a few hundred small files (each a
copy: one descriptor) took the agent's process to ``EMFILE`` -- its commands failed
to start ("Too many open files"), and so would anything else it opened meanwhile (the
model's connection). Now a command's budget is what keeps the whole process within
half its limit; beyond, the directory falls back to its bind (as a spent budget did).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator

import pytest

from trio_agent._tools import _sandbox_fds
from trio_agent._tools._sandbox_fds import fd_budget, held_descriptors


@pytest.fixture
def limit() -> Iterator[int]:
    """RLIMIT_NOFILE's soft limit at 1024 for the test (a common default)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        yield min(1024, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_count() -> int:
    return len(os.listdir("/proc/self/fd")) - 1  # less the listing's own descriptor


def test_the_budget_counts_what_the_process_already_holds(limit: int) -> None:
    # The positive control: with little open, a command gets its whole cap.
    assert fd_budget(200) == 200
    held: list[int] = []
    try:
        while open_count() < limit // 2 - 50:  # what other commands starting meanwhile hold
            held += os.pipe()
        budget = fd_budget(200)
        assert budget + open_count() <= limit // 2, budget  # sec7: 200, whatever was open
        assert budget > 0
        while open_count() < limit // 2 + 10:
            held += os.pipe()
        assert fd_budget(200) == 0  # nothing more: the directories are bound instead
    finally:
        for fd in held:
            os.close(fd)
    assert fd_budget(200) == 200


def test_the_count_is_what_the_listing_shows() -> None:
    # One stat of /proc/self/fd on Linux 6.2+ (its size), the listing before: the same count.
    listed = len(os.listdir("/proc/self/fd")) - 1  # less the listing's own descriptor
    assert held_descriptors() == listed
    read, write = os.pipe()
    try:
        assert held_descriptors() == listed + 2
    finally:
        os.close(read)
        os.close(write)


def test_a_kernel_without_the_size_is_counted_by_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.stat

    def sizeless(path: str, *args: object, **kwargs: object) -> os.stat_result:
        result = real(path)
        if path != "/proc/self/fd":
            return result
        fields = list(result)
        fields[6] = 0  # st_size, as before Linux 6.2
        return os.stat_result(fields)

    counted = held_descriptors()
    monkeypatch.setattr(_sandbox_fds.os, "stat", sizeless)
    assert os.stat("/proc/self/fd").st_size == 0
    assert held_descriptors() == counted
