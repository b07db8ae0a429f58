"""``trio-agent serve --daemon`` and ``trio-agent serve --stop``: the warm daemon's
lifecycle (the daemon itself: ``_server``; its client: ``_trio_agent_launch``).

``--daemon`` starts ``python -m trio_agent._daemon DIR`` in a session of its own
(``start_new_session``: no terminal, so the shell's Ctrl-C never reaches it) with its
output appended to ``DIR/daemon.log``, waits until its socket answers ``status``,
prints its pid and exits 0. When one already answers it says so and exits 0 (so the
command can be used as "make sure one runs") -- unless that one was started from
another installation of trio-agent (``DaemonStatus.build``, an upgrade since): that one
is stopped first (its running turns cancelled, as by ``--stop``) and replaced. ``--stop`` asks the daemon to stop,
waits for its pid to exit and exits 0; with none running it says so and exits 0.
A runtime directory that is unsafe (another owner, group or other permissions) is
exit status 2 with what to do. Both wait at most :data:`WAIT` seconds, then exit 1.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import attrs

from _trio_agent_launch import build_identity, connect, daemon_directory, directory_problem, encode_request, socket_path

__all__ = ["DaemonStatus", "daemon_status", "start_daemon", "stop_daemon"]

WAIT = 30.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # where `trio_agent` is imported from


@attrs.frozen
class DaemonStatus:
    pid: int
    ready: tuple[int, ...]  # pids of the spares ready to take a run
    workers: tuple[int, ...]  # pids of every worker process (spares and running)
    starting: int = 0  # workers whose process is being spawned (no pid yet)
    build: str = ""  # the installation it runs (``_trio_agent_launch.build_identity``)


def _ask(directory: str, op: str) -> str | None:
    sock = connect(socket_path(directory))
    if sock is None:
        return None
    try:
        sock.settimeout(WAIT)
        sock.sendall(encode_request([op]))
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                return None
            data += chunk
        return data.decode().strip()
    except OSError:
        return None
    finally:
        sock.close()


def daemon_status(directory: str | None = None) -> DaemonStatus | None:
    """The daemon answering on ``directory`` (default: the user's), or None."""
    reply = _ask(directory or daemon_directory(), "status")
    if reply is None or not reply.startswith("daemon "):
        return None
    _, pid, ready, workers, starting, *build = reply.split(" ")
    return DaemonStatus(int(pid), _pids(ready), _pids(workers), int(starting), " ".join(build))


def _pids(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(",") if p != "-")


def _say(message: str) -> None:
    print(f"trio-agent serve: {message}", flush=True)


def _checked_directory() -> str | None:
    directory = daemon_directory()
    problem = directory_problem(directory)
    if problem is not None:
        print(f"trio-agent serve: cannot use the daemon directory: {problem}", file=sys.stderr, flush=True)
        return None
    return directory


def start_daemon() -> int:
    directory = _checked_directory()
    if directory is None:
        return 2
    running = daemon_status(directory)
    if running is not None and running.build != build_identity():
        # Started from another installation (an upgrade since): it would serve old code.
        _say(f"replacing the daemon started from another installation of trio-agent (pid {running.pid})")
        code = stop_daemon()
        if code:
            return code
        running = daemon_status(directory)
    if running is not None:
        _say(f"a daemon is already running (pid {running.pid}, socket {socket_path(directory)})")
        return 0
    os.makedirs(directory, mode=0o700, exist_ok=True)
    # Checked again now that it exists: missing at the first check, it may have been made
    # since by another user (/tmp/trio-agent-UID), with a daemon.log linked to a file of ours.
    if _checked_directory() is None:
        return 2
    log = os.open(os.path.join(directory, "daemon.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)}
    # The daemon writes one byte on this pipe once it listens; its end closing unwritten
    # means it exited first. No polling: one select with the deadline.
    ready_read, ready_write = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "trio_agent._daemon", directory, "--ready-fd", str(ready_write)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd="/", start_new_session=True,
            pass_fds=(ready_write,),
        )
    finally:
        os.close(log)
        os.close(ready_write)
    try:
        byte = os.read(ready_read, 1) if select.select([ready_read], [], [], WAIT)[0] else None
    finally:
        os.close(ready_read)
    if byte is None:
        print(f"trio-agent serve: the daemon did not answer within {WAIT:.0f} s (pid {process.pid})", file=sys.stderr)
        return 1
    status = daemon_status(directory)
    if byte and status is not None:
        process.returncode = 0  # it runs on, detached: nothing to wait for here
        _say(f"daemon started (pid {status.pid}, socket {socket_path(directory)}, log "
             f"{os.path.join(directory, 'daemon.log')})")
        return 0
    if status is not None:  # ours exited before listening: another `--daemon` won the lock
        _say(f"a daemon is already running (pid {status.pid}, socket {socket_path(directory)})")
        return 0
    print(f"trio-agent serve: the daemon exited with status {process.wait()}; see "
          f"{os.path.join(directory, 'daemon.log')}", file=sys.stderr, flush=True)
    return 1


def stop_daemon() -> int:
    directory = _checked_directory()
    if directory is None:
        return 2
    reply = _ask(directory, "stop")
    if reply is None or not reply.startswith("stopping "):
        _say(f"no daemon is running (socket {socket_path(directory)})")
        return 0
    pid = int(reply.split(" ")[1])
    if not _wait_exit(pid, WAIT):
        print(f"trio-agent serve: the daemon (pid {pid}) did not stop within {WAIT:.0f} s", file=sys.stderr)
        return 1
    _say(f"daemon stopped (pid {pid})")
    return 0


def _wait_exit(pid: int, seconds: float) -> bool:
    """Whether ``pid`` (not our child) exited within ``seconds``: a pidfd becomes readable then."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], seconds)[0])
    finally:
        os.close(fd)
