"""A cap on this process's address space, for tests of readers that must not read a
hostile file whole: without the cap, a reader that does would try to take the machine's
memory (a sparse file of a terabyte costs its maker nothing); with it, the reader that
is wrong fails at once with ``MemoryError`` and the test says so."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager

#: Room above what the process already maps: enough for any sound read of these tests.
HEADROOM = 2 << 30


def _mapped_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[0])
    return pages * resource.getpagesize()


@contextmanager
def address_space_capped(headroom: int = HEADROOM) -> Iterator[None]:
    """Within the block, at most ``headroom`` bytes more may be mapped (then restored)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _mapped_bytes() + headroom
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
