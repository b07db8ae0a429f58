"""Make a program the session leader of the terminal on its stdin, then run it.

A standalone program (standard library only; it never imports ``trio_agent``), run as
``python -I -S _tty_leader.py PROGRAM ARGS...`` in front of a ``tty: true`` command
where the command's starter cannot do it (``_pty.py``): inside the Bubblewrap sandbox,
whose own processes must not own the terminal, and in the process-group fallback. It
starts a new session (unless it leads one already), makes fd 0 -- a pseudo-terminal
slave no session owns yet -- its controlling terminal (``TIOCSCTTY``), and ``exec``\\s
the program in place, so that the program keeps its pid and its parent.

If the terminal cannot be taken the program still runs (``tty`` and ``stty`` still
work on fd 0; ``/dev/tty`` does not) and a note goes to stderr, which the command's
output shows. If the program cannot be run, it exits 127 as a shell would.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(f"usage: {argv[0]} PROGRAM [ARGS...]  (started by trio_agent's exec_command)", file=sys.stderr)
        return 2
    import fcntl
    import termios

    try:
        if os.getsid(0) != os.getpid():
            os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    except OSError as exc:
        print(f"exec_command: the command runs without a controlling terminal: {exc}", file=sys.stderr)
    try:
        os.execvp(argv[1], argv[1:])
    except OSError as exc:
        print(f"exec_command: cannot run {argv[1]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
