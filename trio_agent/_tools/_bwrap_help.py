"""``bwrap --help``, run ahead: what it lists (``--ro-bind-fd``, ``--perms``) tells the
rebuilt ``/run`` which options it may use (``_sandbox_fds.bwrap_options``).

:func:`start` runs it once the sandbox's trial worked (``_sandbox._trial``), printing
to a memory file, and does not wait: the first command reads it (:func:`printed`), a
model round trip later, when it has long exited -- so neither a command's start nor
the agent's opening waits for a subprocess. Not beside the trial (``start_probe``):
on two cores, spawning it while the trial's ``bwrap`` set up its namespaces took 2-4 ms
of a cold ``trio-agent run``'s path to its request (0.4 ms now), and waiting for it
there cost ~1.5 ms more. Once per executable and process; an agent that never runs a
command leaves the exited process and its memory file (one descriptor) to the process's
end. Linux only, as the sandbox.
"""

from __future__ import annotations

import os
import subprocess

__all__ = ["printed", "start"]

TIMEOUT = 10.0  # as the trial's


class _Run(subprocess.Popen[bytes]):
    """A run that is reaped when dropped unread and done (an agent that never ran a
    command: at the process's end): ``Popen`` warns of any run not waited for, before it
    looks whether it has exited."""

    def __del__(self) -> None:
        self.poll()
        super().__del__()


# per executable: the run and the memory file it prints to, until read (then None)
_started: dict[str, tuple[subprocess.Popen[bytes], int] | None] = {}


def start(bwrap: str) -> None:
    """Start ``bwrap --help`` (nothing when it was started already, read or not)."""
    if bwrap in _started:
        return
    out = os.memfd_create("trio-agent-bwrap-help", os.MFD_CLOEXEC)
    try:
        _started[bwrap] = (
            _Run([bwrap, "--help"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL),
            out,
        )
    except OSError:
        os.close(out)  # bwrap_options runs it at the first command, and gives up quietly


def printed(bwrap: str) -> str | None:
    """What the run :func:`start` started printed, once (None: none was started, it was
    read already, or it gave no answer within :data:`TIMEOUT`)."""
    started = _started.get(bwrap)
    if started is None:
        return None
    _started[bwrap] = None
    helping, out = started
    try:
        try:
            helping.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            helping.kill()
            helping.wait()
            return None
        return os.pread(out, 1 << 20, 0).decode(errors="replace")
    finally:
        os.close(out)
