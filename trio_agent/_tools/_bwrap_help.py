"""What ``bwrap --help`` printed, learnt by the sandbox's trial run: the options it lists
(``--ro-bind-fd``, ``--perms``) tell the rebuilt ``/run`` which it may use
(``_sandbox_fds.bwrap_options``, at the first command).

The trial (``_sandbox._trial``, started by ``start_probe``) runs ``bwrap --help`` itself
as its no-op, inside the sandbox it tries: one process says both whether the sandbox
works and what this ``bwrap`` offers. Before, a second ``bwrap --help`` was spawned
beside the trial: on two cores it waited for a core while the trial's ``bwrap`` set up
its namespaces (2-4 ms of a cold ``trio-agent run``'s path to its request), and reading
it imported ``_sandbox_fds`` on that path. This module holds the text until the first
command asks (no import of the command path's modules before then).
"""

from __future__ import annotations

__all__ = ["note", "printed"]

_printed: dict[str, str] = {}  # per bwrap executable: its --help, until read


def note(bwrap: str, text: str) -> None:
    """Keep what ``bwrap --help`` printed (the trial's output)."""
    _printed[bwrap] = text


def printed(bwrap: str) -> str | None:
    """What the trial's ``bwrap --help`` printed, once (None: no trial of it worked)."""
    return _printed.pop(bwrap, None)
