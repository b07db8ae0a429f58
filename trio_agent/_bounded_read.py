"""The first bytes of a file that a sandboxed command may have made (sec4's review).

A command can leave a terabyte sparse file or a FIFO where the agent later reads a small
one (``AGENTS.md``, a ``.git`` file): one open that neither waits (O_NONBLOCK: a FIFO's
open would block) nor, when asked, follows a link; a regular file only; at most ``limit``
bytes, never the whole file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["read_regular_prefix"]


def read_regular_prefix(path: Path, limit: int, *, follow: bool = True) -> bytes | None:
    """At most ``limit`` bytes of ``path`` if it opens as a regular file, else None (a read
    error after the open raises ``OSError``)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(limit)
    finally:
        os.close(fd)
