"""The command line a stdio MCP server is started with: under its supervisor on Linux.

``_server_reaper.py`` (a child subreaper, see there) stands between the MCP SDK and
the server, so that every process the server starts -- daemons that ``setsid`` or
double-fork included -- ends with it: when the SDK closes it, when the agent's
nursery is cancelled, and when the agent process dies. The SDK starts the supervisor
exactly as it would have started the server (``stdio_client``: its own session, the
server's environment and working directory, stdin/stdout for MCP, stderr to the
agent's buffer), so its shutdown -- close stdin, then SIGTERM, then SIGKILL to the
process group -- is unchanged.

The executable is resolved here, as ``subprocess`` would (a name is looked up in the
``PATH`` of the environment the server gets, a path with a slash is taken from its
working directory), so a missing command is the same ``FileNotFoundError`` as without
a supervisor. Off Linux (no subreapers) the server is started as given.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["SERVER_GRACE", "server_command"]

#: Seconds the supervisor gives what is left of the tree, after SIGTERM, before SIGKILL.
#: Below the SDK's 2 s windows, so the supervisor is done before the SDK escalates.
SERVER_GRACE = 1.0
_REAPER = Path(__file__).with_name("_server_reaper.py")


def _resolve(command: str, env: Mapping[str, str], cwd: Path) -> str:
    candidates = [str(cwd / command)] if "/" in command else [
        os.path.join(folder, command) for folder in os.get_exec_path(dict(env))]
    refused = None
    for path in candidates:
        if os.path.isfile(path):
            if os.access(path, os.X_OK):
                return path
            refused = path
    if refused is not None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), refused)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


def server_command(command: str, args: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[str, list[str]]:
    """``(command, args)`` for ``StdioServerParameters``: the supervisor's on Linux,
    ``command`` and ``args`` themselves elsewhere. ``env`` is the environment the
    server gets (its ``PATH`` finds a bare command name). Raises ``FileNotFoundError``
    (``PermissionError``) when the command is missing (not executable)."""
    if sys.platform != "linux" or not sys.executable or not _REAPER.is_file():
        return command, list(args)
    executable = _resolve(command, env, cwd)
    return sys.executable, ["-I", "-S", str(_REAPER), str(os.getpid()), str(SERVER_GRACE), executable, "--",
                            command, *args]
