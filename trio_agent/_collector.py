"""The garbage collector of a long-running process of ours, tuned once it has started
(``tune_collector``): the Ray pool's actors, ``trio-agent serve`` and ``trio-agent
app-server``.

Why. Such a process holds many objects that live as long as it does -- the modules of
this library, of Trio and of what it serves with, its configuration -- and its agents
allocate many short-lived ones (events, frames, notifications). With Python's defaults
(a collection of the youngest generation every 700 allocations) the short-lived ones
are often caught alive and promoted into the older generations, which then fill and
are walked again, and each full collection walks every long-lived object too.

What. At the end of start-up: one full collection, then ``gc.freeze()`` (what exists
now moves to the permanent generation, which no collection walks), then thresholds
``COLLECTOR_THRESHOLD`` (the youngest generation every 10,000 allocations: most
short-lived objects have died by their reference count before a collection sees them).

The trade-off. An object alive at the freeze is never collected: if it later becomes
unreachable in a reference cycle, its memory stays until the process exits. What is
alive at start-up is modules, classes, the configuration and the server's own state
-- none of it per-thread or per-turn data, which is made later and collected as usual.
Reference cycles made after start-up are still collected.
"""

from __future__ import annotations

import gc

__all__ = ["COLLECTOR_THRESHOLD", "tune_collector"]

COLLECTOR_THRESHOLD = (10_000, 10, 10)  # gc.set_threshold: the youngest generation 14x the default 700


def tune_collector() -> None:
    """Collect, freeze what exists, raise the thresholds (see the module docstring).
    Call it once the process has imported and built what it keeps."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLD)
