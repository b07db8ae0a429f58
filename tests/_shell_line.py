"""How a command from an ``exec`` cell is shown to app-server and exec clients (issue 22
item 4): as codex shows it, the shell's command line -- ``/bin/bash -lc 'echo hi'``."""

from __future__ import annotations

import re
import shlex


def is_shell_line(shown: str, cmd: str) -> bool:
    """Whether ``shown`` is ``cmd`` run by a shell (``SHELL -lc CMD`` or ``SHELL -c CMD``)."""
    return re.fullmatch(r"/\S+ -l?c " + re.escape(shlex.quote(cmd)), shown) is not None
