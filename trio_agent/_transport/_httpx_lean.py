"""Importing httpx without its command-line client (a cold HTTPS start's largest import).

httpx's ``__init__`` tries ``from ._main import main`` -- its ``httpx`` command -- which
imports click and pygments before it fails on rich, or succeeds when all three are
installed (pytest brings pygments, uvicorn click): 10 to 25 ms of a cold start here, for
a command the agent never runs. So the agent's first import of httpx goes without it:
``httpx._main`` is None in ``sys.modules`` for the length of that import (to httpx an
ImportError, upon which it defines its own ``main`` saying how to get the command),
and is removed right after, so that an explicit ``import httpx._main`` later still
works. A process that imported httpx already keeps it as it is; the ``httpx`` console
script runs in a process of its own.
"""

from __future__ import annotations

import sys

__all__ = ["import_httpx"]


def import_httpx() -> None:
    """Import httpx (once per process), leaving out its command-line client."""
    if "httpx" in sys.modules:
        return
    sys.modules["httpx._main"] = None  # type: ignore[assignment]  # None: "not importable"
    try:
        import httpx  # noqa: F401
    finally:
        if "httpx._main" in sys.modules and sys.modules["httpx._main"] is None:
            del sys.modules["httpx._main"]
