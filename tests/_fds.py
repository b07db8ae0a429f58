"""What this process holds open, for tests that assert nothing leaked.

A test compares what is open after its work with what was open before. Equality is
too strict: a finaliser of an object an earlier test dropped (a socket, a pipe) may
close one of the process's descriptors in between, which is not a leak (CI saw it:
fd 36 gone after sixteen sandboxed commands, nothing new). A leak is a descriptor that
is open now and was not before, or whose number now names something else.
"""

from __future__ import annotations

import gc
import os


def held() -> dict[int, str]:
    """Each open descriptor and what it names, after a garbage collection."""
    gc.collect()
    out: dict[int, str] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            continue
    return out


def opened_since(before: dict[int, str]) -> dict[int, str]:
    """Descriptors open now that were not open (as the same thing) in ``before``."""
    return {fd: what for fd, what in held().items() if before.get(fd) != what}
