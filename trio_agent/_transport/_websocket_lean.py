"""Importing trio-websocket without ``importlib.metadata`` (a cold WebSocket start's
largest avoidable import).

trio-websocket's ``_impl`` runs ``from importlib.metadata import version`` and then
``version("trio")`` once, at import, to tell whether trio is older than 0.22 (its
MultiError days; this package needs trio >= 0.27). ``importlib.metadata`` brings the
``email`` package, ``zipfile``, ``csv`` and a scan of ``sys.path`` for trio's
distribution: 10-15 ms of a cold ``trio-agent run``'s ~250 ms of CPU, for a number the
installed ``trio.__version__`` already says. So the agent's first import of
trio-websocket goes with a stand-in ``importlib.metadata`` in ``sys.modules`` for the
length of that import, whose ``version`` answers ``trio`` from ``trio.__version__`` and
any other name from the real module (imported then); the stand-in is removed right
after, so that ``import importlib.metadata`` later gets the real one. A process that
imported either already keeps it as it is (the real module is used). Same shape as
``_httpx_lean``.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

import trio

__all__ = ["trio_websocket"]

_REAL = "importlib.metadata"


class _StandIn(types.ModuleType):
    """``importlib.metadata`` while trio-websocket is imported: ``version("trio")`` from
    the imported trio, any other name from the real module (imported then). Another
    thread that imports ``importlib.metadata`` meanwhile gets this, which then works."""

    def __init__(self) -> None:
        super().__init__(_REAL, "trio_agent's stand-in while trio-websocket is imported (_websocket_lean)")

    def version(self, name: str) -> str:
        if name == "trio":
            return trio.__version__
        version: str = _real().version(name)
        return version

    def __getattr__(self, name: str) -> object:
        # Not the module's own dunders: the import system asks for ``__path__`` (is it a
        # package?) on every ``from importlib.metadata import ...``, trio-websocket's too.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real(), name)


def _real() -> types.ModuleType:
    """The real ``importlib.metadata``, imported now if it was not (the stand-in then
    leaves ``sys.modules`` for good: its one use, trio-websocket's import, has it already)."""
    current = sys.modules.get(_REAL)
    if current is not None and not isinstance(current, _StandIn):
        return current
    stand_in = sys.modules.pop(_REAL, None)
    try:
        import importlib.metadata

        return importlib.metadata
    finally:
        if stand_in is not None and _REAL not in sys.modules:
            sys.modules[_REAL] = stand_in


def _import() -> types.ModuleType:
    if "trio_websocket" in sys.modules or _REAL in sys.modules:
        import trio_websocket

        return trio_websocket
    stand_in = _StandIn()
    sys.modules[_REAL] = stand_in
    try:
        import trio_websocket
    finally:
        if sys.modules.get(_REAL) is stand_in:
            del sys.modules[_REAL]
    return trio_websocket


if TYPE_CHECKING:
    import trio_websocket
else:
    trio_websocket = _import()
