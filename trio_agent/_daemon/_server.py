"""The warm daemon's process: its socket, the accept loop, one task per client.

``serve_daemon`` binds ``DIR/daemon.sock`` (with ``DIR/daemon.lock`` held), answers
``status`` and ``stop``, refuses a peer it does not serve (``_peer``), answers
``fallback stale`` to another installation's client, and hands a ``run`` to a ready
worker of the pool (``_pool``), forwarding the client's signals to it until it
reports the exit status. The whole picture: the package's docstring.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import sys
from collections.abc import Iterable

import trio

from _trio_agent_launch import build_identity, directory_problem, socket_path

from ._channel import LineSocket, close_fds
from ._peer import peer_problem
from ._pool import CLOSE_GRACE, Pool, RunRequest, Worker

__all__ = ["main", "serve_daemon"]

REQUEST_BOUND = 10.0  # seconds a connected client has to send its request
MAX_REQUEST = 1 << 20  # bytes of one request (argv, cwd and environment; a real one is a few KiB)


class _Daemon:
    def __init__(self, directory: str, nursery: trio.Nursery) -> None:
        self.directory = directory
        self.build = build_identity()  # the installation this daemon runs (see _trio_agent_launch)
        self.pool = Pool(nursery)
        self.stop = trio.Event()
        self.clients = 0
        self.no_clients = trio.Event()
        self.no_clients.set()

    async def serve_client(self, sock: trio.socket.SocketType) -> None:
        self.clients += 1
        self.no_clients = trio.Event()
        conn = LineSocket(sock)
        try:
            await self._serve_client(conn)
        except (OSError, trio.BrokenResourceError, ValueError, IndexError) as exc:
            print(f"trio-agent daemon: a client connection failed: {exc!r}", file=sys.stderr, flush=True)
        finally:
            conn.close()
            self.clients -= 1
            if not self.clients:
                self.no_clients.set()

    async def _serve_client(self, conn: LineSocket) -> None:
        # The directory is 0700 and hidden from sandboxes; this is the second lock: only
        # this user, outside any sandbox (_peer). A refused request is not read.
        problem = peer_problem(conn.sock)
        if problem == "another user":
            return
        if problem is not None:
            await conn.send(f"refused {problem}\n".encode())
            with trio.move_on_after(REQUEST_BOUND):
                await conn.discard(MAX_REQUEST)  # then the client reads it, whenever it sent its request
            return
        payload = None  # stays None when the client is silent for REQUEST_BOUND or goes away
        with trio.move_on_after(REQUEST_BOUND):
            size = await conn.line()
            if size is None:
                return
            if not size.isdigit() or int(size) > MAX_REQUEST:
                raise ValueError(f"a request must start with its size (at most {MAX_REQUEST} bytes), got {size!r:.40}")
            payload = await conn.exactly(int(size))
        if payload is None:
            return
        fields = payload.decode("utf-8", "surrogateescape").split("\0")
        if fields[0] == "status":
            ready = _pids(w for w in self.pool.spare_workers() if w.ready.is_set() and not w.closing)
            starting = sum(w.pid is None for w in self.pool.workers())
            await conn.send(
                f"daemon {os.getpid()} {ready} {_pids(self.pool.workers())} {starting} {self.build}\n".encode())
        elif fields[0] == "stop":
            await conn.send(f"stopping {os.getpid()}\n".encode())
            self.stop.set()
        elif fields[0] == "run" and fields[1:2] != [self.build]:
            # Another installation's client (an upgrade since this daemon started): our
            # workers would run other code than it expects. It runs in-process and says so.
            await conn.send(f"fallback stale daemon: started from another installation (pid {os.getpid()})\n".encode())
        elif fields[0] == "run":
            await self._run(conn, RunRequest.parse([fields[0], *fields[2:]]))

    async def _run(self, conn: LineSocket, request: RunRequest) -> None:
        fds = conn.take_fds()
        try:
            worker = await self.pool.take(request) if len(fds) == 3 else "the standard streams did not arrive"
            if not isinstance(worker, Worker) or not await worker.attach(request, fds):
                reason = worker if isinstance(worker, str) else "the prewarmed agent went away"
                await conn.send(f"fallback {reason}\n".encode())
                return
        finally:
            close_fds(fds)  # the worker has its own copies now
        await conn.send(b"ok\n")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._forward_signals, conn, worker)
            await worker.finished.wait()
            nursery.cancel_scope.cancel()
        await conn.send(f"exit {worker.code}\n".encode())

    @staticmethod
    async def _forward_signals(conn: LineSocket, worker: Worker) -> None:
        while (line := await conn.line()) is not None:
            word, _, number = line.decode().partition(" ")
            if word == "signal" and number.isdigit() and int(number) in (signal.SIGINT, signal.SIGTERM):
                worker.signal(int(number))
        await worker.tell("detach")  # the client went away: cancel its run, never the daemon


def _pids(workers: Iterable[Worker]) -> str:
    return ",".join(str(w.pid) for w in workers if w.pid is not None) or "-"


def _bind(directory: str) -> tuple[trio.socket.SocketType, int]:
    """The lock (a second daemon fails here) and the listening socket."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    problem = directory_problem(directory)
    if problem is not None:
        raise SystemExit(f"trio-agent daemon: {problem}")
    lock = os.open(os.path.join(directory, "daemon.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        raise SystemExit(f"trio-agent daemon: another daemon is running on {directory}") from None
    path = socket_path(directory)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a stale socket: we hold the lock, so nobody listens on it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    return trio.socket.from_stdlib_socket(listener), lock


async def serve_daemon(directory: str, ready_fd: int | None = None, *,
                       task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``run`` requests on ``directory``'s socket until ``stop`` or SIGTERM/SIGINT;
    once it listens, one byte is written on ``ready_fd`` (``serve --daemon`` waits for it)."""
    listener, lock = _bind(directory)
    try:
        async with trio.open_nursery() as nursery:
            daemon = _Daemon(directory, nursery)
            nursery.start_soon(daemon.pool.reap_idle)
            nursery.start_soon(_watch_signals, daemon.stop)
            accepting = trio.CancelScope()
            nursery.start_soon(_accept, listener, daemon, nursery, accepting)
            print(f"trio-agent daemon: pid {os.getpid()} listening on {socket_path(directory)}", file=sys.stderr,
                  flush=True)
            task_status.started()
            if ready_fd is not None:
                os.write(ready_fd, b"r")
                os.close(ready_fd)
            await daemon.stop.wait()
            with trio.CancelScope(shield=True):
                accepting.cancel()
                _unlink(directory)  # from now on clients fall back to running in-process
                listener.close()
                with trio.move_on_after(CLOSE_GRACE):
                    await daemon.pool.aclose()
                with trio.move_on_after(2.0):
                    await daemon.no_clients.wait()  # their "exit N" lines are out
            nursery.cancel_scope.cancel()
    finally:
        _unlink(directory)
        listener.close()
        os.close(lock)
    print("trio-agent daemon: stopped", file=sys.stderr, flush=True)


def _unlink(directory: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path(directory))


async def _accept(listener: trio.socket.SocketType, daemon: _Daemon, nursery: trio.Nursery,
                  scope: trio.CancelScope) -> None:
    with scope:
        while True:
            sock, _ = await listener.accept()
            nursery.start_soon(daemon.serve_client, sock)


async def _watch_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop.set()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    ready_fd = int(args[2]) if args[1:2] == ["--ready-fd"] else None
    trio.run(serve_daemon, args[0], ready_fd)
    return 0

