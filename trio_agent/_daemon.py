"""The warm daemon: ``trio-agent run`` served by prewarmed worker processes.

``python -m trio_agent._daemon DIR`` (started detached by ``trio-agent serve
--daemon``, ``_daemon_command``) listens on ``DIR/daemon.sock``; the thin client
(``_trio_agent_launch``) sends it ``run`` requests with its stdin, stdout and stderr.

Theory of operation. A request's *configuration key* is everything the command reads
before it sends the prompt: the argv with the prompt taken out, the working directory,
and the environment but for the variables that only describe the terminal session
(:data:`VOLATILE`). That covers the model, the API base and transport, the workspace,
the sandbox and approval options, the instructions and the credentials. For each key
the daemon keeps at most one *spare*: a worker process (``_daemon_worker``) that ran
the CLI's own ``run`` code up to the prompt -- agent open, socket warmed -- and waits.

- A request whose key has a ready spare takes it: the daemon hands the worker the
  prompt, the client's environment and descriptors, answers ``ok``, forwards the
  client's signals to the worker (``kill``) and finally sends ``exit N``. The output
  never passes through the daemon. When the worker has exited, the daemon starts the
  next spare for that key -- after the run, so that it does not compete with the
  turn for the CPU.
- A spare still starting is waited for (it started earlier than any fallback could).
- No spare: the daemon answers ``fallback`` at once, the client runs in-process, and
  the daemon starts a spare for next time. A worker that fails before it is ready
  (a bad option: the in-process run shows the error) marks its key as failing for
  :data:`FAILED_FOR` seconds, during which its requests fall back without a worker.
- A client that goes away cancels its run (``detach``), never the daemon.

Bounds: at most :data:`MAX_SPARES` spares (``TRIO_AGENT_DAEMON_SPARES``; starting one more closes the least recently
used ready one); a spare unused for :data:`SPARE_IDLE` seconds is closed. Workers
serve one run each, so no state carries from one run to the next.

Concurrency: one Trio nursery holds the accept loop, one task per client connection,
one task per worker process (which owns it: spawn, messages, exit) and the idle
reaper. ``stop`` (or SIGTERM/SIGINT) removes the socket file first, so new clients
fall back, then closes every spare cleanly and cancels running turns (SIGTERM, as if
the user had sent it: the client prints the cancelled line and exits 143), waits
for every worker -- bounded by :data:`CLOSE_GRACE`, then killed -- and ends.
A ``daemon.lock`` file held with ``flock`` makes a second daemon on the same
directory refuse to start.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs
import trio

from _trio_agent_launch import directory_problem, socket_path

from ._daemon_channel import LineSocket, close_fds

__all__ = ["CLOSE_GRACE", "FAILED_FOR", "MAX_SPARES", "SPARE_IDLE", "VOLATILE", "RunRequest", "main", "serve_daemon"]

#: At most this many spares (``TRIO_AGENT_DAEMON_SPARES`` when the daemon starts overrides it).
MAX_SPARES = 4
SPARE_IDLE = 15 * 60.0
FAILED_FOR = 30.0
CLOSE_GRACE = 10.0
REQUEST_BOUND = 10.0  # seconds a connected client has to send its request
#: Variables left out of the configuration key: they describe the shell session or the
#: terminal, not the run (the worker still gets the client's values at attach time).
VOLATILE = frozenset({
    "_", "OLDPWD", "PWD", "SHLVL", "COLUMNS", "LINES", "TERM", "COLORTERM", "WINDOWID", "TERM_SESSION_ID",
    "TMUX_PANE", "STY", "WINDOW", "SSH_TTY", "GPG_TTY", "PS1", "PROMPT_COMMAND",
})
PLACEHOLDER = "prompt-given-at-attach"
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)  # where `trio_agent` is imported from
_WORKER = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
           "from trio_agent._daemon_worker import main; main()")


@attrs.frozen
class RunRequest:
    """A client's ``run``: where, what, with which environment."""

    cwd: str
    argv: tuple[str, ...]
    index: int  # of the prompt in argv
    env: Mapping[str, str]

    @classmethod
    def parse(cls, fields: list[str]) -> RunRequest:
        cwd, index, count = fields[1], int(fields[2]), int(fields[3])
        argv = tuple(fields[4:4 + count])
        env = dict(entry.split("=", 1) for entry in fields[4 + count:] if "=" in entry)
        if not 0 < index < len(argv):
            raise ValueError(f"prompt index {index} outside argv")
        return cls(cwd, argv, index, env)

    @property
    def prompt(self) -> str:
        return self.argv[self.index]

    @property
    def template(self) -> list[str]:
        """The argv with the prompt replaced by a placeholder (what a spare is started with)."""
        argv = list(self.argv)
        argv[self.index] = PLACEHOLDER
        return argv

    def key(self) -> str:
        env = sorted((k, v) for k, v in self.env.items() if k not in VOLATILE)
        return hashlib.sha256(json.dumps([self.template, self.cwd, env]).encode()).hexdigest()


class _Worker:
    """One worker process and its socket; the task in :meth:`run` owns both."""

    def __init__(self, key: str, request: RunRequest) -> None:
        self.key = key
        self.request = request
        self.ready = trio.Event()
        self.done = trio.Event()
        self.taken = False
        self.closing = False
        self.code: int | None = None
        self.used_at = trio.current_time()
        self.process: trio.Process | None = None
        self.channel: LineSocket | None = None

    async def run(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            command = [sys.executable, "-c", _WORKER, _PACKAGE_ROOT, str(theirs.fileno()), *self.request.template]
            self.process = await trio.lowlevel.open_process(
                command, pass_fds=(theirs.fileno(),), cwd=self.request.cwd, env=dict(self.request.env),
                stdin=subprocess.DEVNULL,  # until attach: its output is the daemon's log
            )
        except OSError as exc:
            ours.close()
            print(f"trio-agent daemon: cannot start a worker: {exc}", file=sys.stderr, flush=True)
            self.done.set()
            return
        finally:
            theirs.close()
        self.channel = LineSocket(trio.socket.from_stdlib_socket(ours))
        try:
            while (message := await self.channel.message()) is not None:
                if message.get("op") == "ready":
                    self.used_at = trio.current_time()
                    self.ready.set()
                elif message.get("op") == "exit":
                    self.code = int(message["code"])
            status = await self.process.wait()
        finally:
            with trio.CancelScope(shield=True):
                await self._reap()
            self.channel.close()
            self.done.set()
        if self.code is None:
            self.code = 128 - status if status < 0 else status

    async def _reap(self) -> None:
        assert self.process is not None
        with trio.move_on_after(CLOSE_GRACE):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def attach(self, request: RunRequest, fds: list[int]) -> bool:
        """Give the worker the client's run; False if it is gone."""
        assert self.channel is not None
        self.taken = True
        message = {"op": "attach", "prompt": request.prompt, "env": dict(request.env)}
        try:
            await self.channel.send_message(message, fds)
        except OSError:
            return False
        return True

    async def tell(self, op: str) -> None:
        if self.channel is not None and not self.done.is_set():
            with contextlib.suppress(OSError, trio.ClosedResourceError):
                await self.channel.send_message({"op": op})

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signum)

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


class _Pool:
    """The spares, one per configuration key, and the workers running a client's turn."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self.spares: dict[str, _Worker] = {}
        self.running: set[_Worker] = set()
        self.failed: dict[str, float] = {}
        self.stopping = False
        self.max_spares = int(os.environ.get("TRIO_AGENT_DAEMON_SPARES") or MAX_SPARES)

    async def take(self, request: RunRequest) -> _Worker | str:
        """A ready worker for ``request``, or why the client should run in-process."""
        key = request.key()
        if trio.current_time() - self.failed.get(key, -FAILED_FOR) < FAILED_FOR:
            return "this configuration failed to start in the daemon recently"
        spare = self.spares.get(key)
        if spare is None:
            self.start(key, request)
            return "no prewarmed agent for this configuration yet: starting one"
        if not spare.ready.is_set():
            async with trio.open_nursery() as nursery:
                async def until(event: trio.Event) -> None:
                    await event.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(until, spare.ready)
                nursery.start_soon(until, spare.done)
            if not spare.ready.is_set() or spare.done.is_set():
                return "the prewarmed agent failed to start"
        del self.spares[key]
        self.running.add(spare)
        return spare

    def start(self, key: str, request: RunRequest) -> None:
        if self.stopping or key in self.spares:
            return
        ready = sorted((w for w in self.spares.values() if w.ready.is_set() and not w.closing),
                       key=lambda w: w.used_at)
        if len(self.spares) >= self.max_spares and ready:
            self._close(ready[0])
        worker = _Worker(key, request)
        self.spares[key] = worker
        self._nursery.start_soon(self._keep, worker)

    def _close(self, worker: _Worker) -> None:
        worker.closing = True
        if self.spares.get(worker.key) is worker:
            del self.spares[worker.key]
        self._nursery.start_soon(worker.tell, "close")

    async def _keep(self, worker: _Worker) -> None:
        try:
            await worker.run()
        finally:
            if self.spares.get(worker.key) is worker:
                del self.spares[worker.key]
            self.running.discard(worker)
        if not worker.ready.is_set() and not worker.closing:
            self.failed[worker.key] = trio.current_time()
        elif worker.taken and worker.key not in self.spares:
            self.start(worker.key, worker.request)  # the next spare, now that the turn is over

    async def reap_idle(self) -> None:
        while True:
            await trio.sleep(min(SPARE_IDLE, 60.0))
            now = trio.current_time()
            for worker in list(self.spares.values()):
                if worker.ready.is_set() and now - worker.used_at >= SPARE_IDLE:
                    self._close(worker)

    def workers(self) -> list[_Worker]:
        return [*self.spares.values(), *self.running]

    async def aclose(self) -> None:
        """Close every spare, cancel every running turn (SIGTERM), wait for them all."""
        self.stopping = True
        workers = self.workers()
        for worker in list(self.spares.values()):
            self._close(worker)
        for worker in self.running:
            worker.signal(signal.SIGTERM)
        for worker in workers:
            await worker.done.wait()


class _Daemon:
    def __init__(self, directory: str, nursery: trio.Nursery) -> None:
        self.directory = directory
        self.pool = _Pool(nursery)
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
        if _peer_uid(conn.sock) != os.getuid():  # the directory is 0700; this is the second lock
            return
        with trio.move_on_after(REQUEST_BOUND):
            size = await conn.line()
            payload = None if size is None else await conn.exactly(int(size))
        if size is None or payload is None:
            return
        fields = payload.decode("utf-8", "surrogateescape").split("\0")
        if fields[0] == "status":
            ready = _pids(w for w in self.pool.spares.values() if w.ready.is_set() and not w.closing)
            await conn.send(f"daemon {os.getpid()} {ready} {_pids(self.pool.workers())}\n".encode())
        elif fields[0] == "stop":
            await conn.send(f"stopping {os.getpid()}\n".encode())
            self.stop.set()
        elif fields[0] == "run":
            await self._run(conn, RunRequest.parse(fields))

    async def _run(self, conn: LineSocket, request: RunRequest) -> None:
        fds = conn.take_fds()
        try:
            worker = await self.pool.take(request) if len(fds) == 3 else "the standard streams did not arrive"
            if not isinstance(worker, _Worker) or not await worker.attach(request, fds):
                reason = worker if isinstance(worker, str) else "the prewarmed agent went away"
                await conn.send(f"fallback {reason}\n".encode())
                return
        finally:
            close_fds(fds)  # the worker has its own copies now
        await conn.send(b"ok\n")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._forward_signals, conn, worker)
            await worker.done.wait()
            nursery.cancel_scope.cancel()
        await conn.send(f"exit {worker.code}\n".encode())

    @staticmethod
    async def _forward_signals(conn: LineSocket, worker: _Worker) -> None:
        while (line := await conn.line()) is not None:
            word, _, number = line.decode().partition(" ")
            if word == "signal" and number.isdigit() and int(number) in (signal.SIGINT, signal.SIGTERM):
                worker.signal(int(number))
        await worker.tell("detach")  # the client went away: cancel its run, never the daemon


def _peer_uid(sock: trio.socket.SocketType) -> int:
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return int(uid)


def _pids(workers: Iterable[_Worker]) -> str:
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


async def serve_daemon(directory: str, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``run`` requests on ``directory``'s socket until ``stop`` or SIGTERM/SIGINT."""
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
    trio.run(serve_daemon, args[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
