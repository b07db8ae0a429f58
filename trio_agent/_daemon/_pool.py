"""The warm daemon's workers and spares (the whole picture: the package's docstring).

:class:`RunRequest` is a client's ``run`` and its configuration key. :class:`Worker`
is one worker process (``_worker``) with its socket; the task in
:meth:`Worker.run` owns both, from the spawn to the reaped exit. :class:`Pool` keeps up
to :data:`SPARES_PER_KEY` spares per key (:data:`MAX_SPARES` in all, never more), hands
a ready one to a client and starts its replacement at once -- ahead of the next run,
not after this one -- remembers keys whose worker failed before it was ready, and
closes spares unused for :data:`SPARE_IDLE` seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs
import trio

from ._channel import LineSocket

__all__ = ["CLOSE_GRACE", "FAILED_FOR", "MAX_SPARES", "SPARES_PER_KEY", "SPARE_IDLE", "VOLATILE", "Pool",
           "RunRequest", "Worker"]

#: At most this many spares in all, ready or starting (``TRIO_AGENT_DAEMON_SPARES`` when the
#: daemon starts overrides it); workers running a client's turn are not spares.
MAX_SPARES = 4
#: Spares kept per configuration (``TRIO_AGENT_DAEMON_SPARES_PER_KEY`` overrides it; at most
#: ``MAX_SPARES``). Two, so that a run that follows the previous one at once finds the second
#: ready while the first one's replacement (started when the first was taken) imports.
SPARES_PER_KEY = 2
#: Seconds a ready spare may stay unused before it is closed (``TRIO_AGENT_DAEMON_IDLE`` overrides it).
SPARE_IDLE = 15 * 60.0
#: Seconds during which a configuration whose worker failed before it was ready falls back at once.
FAILED_FOR = 30.0
#: Seconds a closing worker has to exit before it is killed.
CLOSE_GRACE = 10.0
#: Variables left out of the configuration key: they describe the shell session or the
#: terminal, not the run (the worker still gets the client's values at attach time).
VOLATILE = frozenset({
    "_", "OLDPWD", "PWD", "SHLVL", "COLUMNS", "LINES", "TERM", "COLORTERM", "WINDOWID", "TERM_SESSION_ID",
    "TMUX_PANE", "STY", "WINDOW", "SSH_TTY", "GPG_TTY", "PS1", "PROMPT_COMMAND",
    "TRIO_AGENT_DAEMON_VERBOSE",  # read by the thin client only (_trio_agent_launch)
})
PLACEHOLDER = "prompt-given-at-attach"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # where `trio_agent` is imported from
_WORKER = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
           "from trio_agent._daemon._worker import main; main()")


@attrs.frozen
class RunRequest:
    """A client's ``run``: where, what, with which environment."""

    cwd: str
    argv: tuple[str, ...]
    index: int  # of the prompt in argv
    env: Mapping[str, str]

    @classmethod
    def parse(cls, fields: list[str]) -> RunRequest:
        """A ``run`` request from its fields, its installation field taken out (checked by the daemon)."""
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
        return hashlib.sha256(json.dumps([self.template, self.cwd, env, self._login()]).encode()).hexdigest()

    def _login(self) -> list[int] | None:
        """Without ``OPENAI_API_KEY`` the command signs in with the Codex login, read when
        the worker starts: a login written since (a refresh, another account) is a new key."""
        if self.env.get("OPENAI_API_KEY", "").strip():
            return None
        home = self.env.get("CODEX_HOME") or os.path.join(self.env.get("HOME") or os.path.expanduser("~"), ".codex")
        try:
            info = os.stat(os.path.join(os.path.expanduser(home), "auth.json"))
        except OSError:
            return None
        return [info.st_ino, info.st_mtime_ns, info.st_size]


class Worker:
    """One worker process and its socket; the task in :meth:`run` owns both."""

    def __init__(self, key: str, request: RunRequest) -> None:
        self.key = key
        self.request = request
        self.spawned = trio.Event()  # the process exists (or could not be started)
        self.ready = trio.Event()
        self.finished = trio.Event()  # the run's exit status is known (:attr:`code`)
        self.done = trio.Event()  # the process has exited and was reaped
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
            self.code = 1
            self.finished.set()
            self.done.set()
            return
        finally:
            theirs.close()
            self.spawned.set()
        self.channel = LineSocket(trio.socket.from_stdlib_socket(ours))
        try:
            while (message := await self.channel.message()) is not None:
                if message.get("op") == "ready":
                    self.used_at = trio.current_time()
                    self.ready.set()
                elif message.get("op") == "exit":  # sent before the interpreter's own exit: answer now
                    self.code = int(message["code"])
                    self.finished.set()
            await self.process.wait()
        finally:
            # Our end closed first: a worker still waiting for a client (or running one
            # when the daemon is cancelled) sees the daemon go away and ends by itself.
            self.channel.close()
            with trio.CancelScope(shield=True):
                await self._reap()
            if self.code is None:  # it ended without saying (a second Ctrl-C, a crash)
                status = self.process.returncode
                self.code = 1 if status is None else 128 - status if status < 0 else status
            self.finished.set()
            self.done.set()

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
        except (OSError, trio.ClosedResourceError):
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


class Pool:
    """The spares, up to :attr:`per_key` per configuration key, and the workers running a client's turn."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self.spares: dict[str, list[Worker]] = {}  # per key, oldest first
        self.running: set[Worker] = set()
        self.failed: dict[str, float] = {}
        self.stopping = False
        self.max_spares = int(os.environ.get("TRIO_AGENT_DAEMON_SPARES") or MAX_SPARES)
        self.per_key = max(1, min(self.max_spares,
                                  int(os.environ.get("TRIO_AGENT_DAEMON_SPARES_PER_KEY") or SPARES_PER_KEY)))
        self.idle = float(os.environ.get("TRIO_AGENT_DAEMON_IDLE") or SPARE_IDLE)

    def spare_workers(self) -> list[Worker]:
        return [worker for workers in self.spares.values() for worker in workers]

    async def take(self, request: RunRequest) -> Worker | str:
        """A ready worker for ``request``, or why the client should run in-process. Either
        way the key's spares are topped up now, ahead of the next run."""
        key = request.key()
        if trio.current_time() - self.failed.get(key, -FAILED_FOR) < FAILED_FOR:
            return "this configuration failed to start in the daemon recently"
        spares = self.spares.get(key, [])
        spare = next((w for w in spares if w.ready.is_set()), spares[0] if spares else None)
        if spare is None:
            started = self.fill(key, request)
            for worker in started:
                await worker.spawned.wait()  # so that `status` lists its pid once the client has its answer
            return "no prewarmed agent for this configuration yet: starting one"
        if not spare.ready.is_set():
            async with trio.open_nursery() as nursery:
                async def until(event: trio.Event) -> None:
                    await event.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(until, spare.ready)
                nursery.start_soon(until, spare.done)
            if not spare.ready.is_set() or spare.done.is_set() or spare not in self.spares.get(key, []):
                return "the prewarmed agent failed to start"
        self._forget(spare)
        spare.taken = True
        self.running.add(spare)
        self.fill(key, request)  # its replacement starts now, while this run streams
        return spare

    def fill(self, key: str, request: RunRequest) -> list[Worker]:
        """Start spares for ``key`` up to :attr:`per_key` (none while the daemon stops)."""
        started = []
        while len(self.spares.get(key, [])) < self.per_key and (worker := self.start(key, request)) is not None:
            started.append(worker)
        return started

    def start(self, key: str, request: RunRequest) -> Worker | None:
        """Start one more spare for ``key``; at the bound, close the least recently used
        ready spare of another key to make room, or start none."""
        if self.stopping or len(self.spares.get(key, [])) >= self.per_key:
            return None
        if len(self.spare_workers()) >= self.max_spares:
            others = sorted((w for w in self.spare_workers() if w.key != key and w.ready.is_set() and not w.closing),
                            key=lambda w: w.used_at)
            if not others:
                return None
            self._close(others[0])
        worker = Worker(key, request)
        self.spares.setdefault(key, []).append(worker)
        self._nursery.start_soon(self._keep, worker)
        return worker

    def _forget(self, worker: Worker) -> None:
        spares = self.spares.get(worker.key, [])
        if worker in spares:
            spares.remove(worker)
            if not spares:
                del self.spares[worker.key]

    def _close(self, worker: Worker) -> None:
        worker.closing = True
        self._forget(worker)
        self._nursery.start_soon(worker.tell, "close")

    async def _keep(self, worker: Worker) -> None:
        try:
            await worker.run()
        finally:
            self._forget(worker)
            self.running.discard(worker)
        if not worker.ready.is_set() and not worker.closing:
            self.failed[worker.key] = trio.current_time()
        elif worker.taken:
            self.fill(worker.key, worker.request)  # one the bound kept from starting at take time

    async def reap_idle(self) -> None:
        while True:
            await trio.sleep(min(self.idle, 60.0))
            now = trio.current_time()
            for worker in self.spare_workers():
                if worker.ready.is_set() and now - worker.used_at >= self.idle:
                    self._close(worker)

    def workers(self) -> list[Worker]:
        return [*self.spare_workers(), *self.running]

    async def aclose(self) -> None:
        """Close every spare, cancel every running turn (SIGTERM), wait for them all."""
        self.stopping = True
        workers = self.workers()
        for worker in self.spare_workers():
            self._close(worker)
        for worker in self.running:
            worker.signal(signal.SIGTERM)
        for worker in workers:
            await worker.done.wait()
