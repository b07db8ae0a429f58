"""One warm daemon worker: a prewarmed ``trio-agent run`` waiting for its prompt.

``python -c ... FD ARGV...`` (started by ``_pool``): ``FD`` is this process's end
of a socket pair with the daemon, ``ARGV`` the client's ``run`` command line with the
prompt replaced by a placeholder. The worker parses it exactly as
the CLI does (``cli._main``), runs ``cli._run.run_command`` with a :class:`_Hold`, and so
opens the agent (the local scripted model too, with ``--local``) and warms its socket.
Then it tells the daemon ``ready`` and waits.

Until a client attaches, whatever the command prints goes to a :class:`_Recorder`.
``attach`` brings the client's prompt, environment and its stdin, stdout and stderr
(``SCM_RIGHTS``): the worker puts the descriptors on its fds 0, 1 and 2, takes the
client's environment (tools see it), replays the recorded output in order, and
returns the prompt to ``run_command``, which sends it over the warm socket. The
printer measures the terminal again (``attached``). From then on the worker is the
in-process CLI, on the client's terminal; the daemon forwards the client's signals
with ``kill``, so Ctrl-C is handled by the same code.

A worker that ends without a client (a bad option, a sandbox that cannot work, an
error) writes what it printed to the daemon's log. When the command ends the worker
points fds 0-2 at ``/dev/null`` (whoever reads the
client's pipes sees them close with the client), reports ``exit`` with the status and
exits: a worker serves one run. ``detach`` (the client went away) silences fds 0-2
and cancels the run as a Ctrl-C would; ``close`` before a client came, or the daemon
going away, ends the worker quietly (the agent closes as usual).
"""

from __future__ import annotations

import io
import os
import signal
import socket
import sys
import warnings
from typing import Any

import trio

import trio_agent as ta

from ..cli._signals import Interrupts
from ._channel import LineSocket, close_fds

__all__ = ["main"]

#: How long a worker waits for its warmup to end before it says ``ready`` anyway
#: (``TRIO_AGENT_DAEMON_WARMUP_BOUND`` seconds when set).
WARMUP_BOUND = 30.0


class _Recorder:
    """Everything written to ``sys.stdout``/``sys.stderr`` before a client attached, in order."""

    def __init__(self) -> None:
        self.chunks: list[tuple[int, str]] = []
        self.attached = False  # a client's descriptors are fds 0-2

    def stream(self, fd: int) -> io.TextIOBase:
        recorder = self

        class _Stream(io.TextIOBase):
            def write(self, text: str) -> int:
                recorder.chunks.append((fd, text))
                return len(text)

        return _Stream()

    def replay(self) -> None:
        for fd, text in self.chunks:
            stream = sys.__stdout__ if fd == 1 else sys.__stderr__
            assert stream is not None
            stream.write(text)
            stream.flush()
        self.chunks = []


class _Hold:
    """``run_command``'s hold (``cli._run.Hold``): warm, say ready, wait for a client."""

    def __init__(self, channel: LineSocket, recorder: _Recorder, nursery: trio.Nursery) -> None:
        self._channel = channel
        self._recorder = recorder
        self._nursery = nursery

    async def __call__(self, agent: ta.Agent, warms: bool) -> str:
        # Only an agent that sends a warmup has one to wait for: one that sends none (the
        # generic profile -- any non-OpenAI host, a loopback server included -- or HTTPS)
        # is ready now; waiting for its warmup events held it back WARMUP_BOUND seconds.
        if warms:
            await _warm(agent)
        try:
            await self._channel.send_message({"op": "ready"})
            message = await self._channel.message()
        except OSError:
            message = None
        if message is None or message.get("op") != "attach":  # "close", or the daemon went away
            self._nursery.cancel_scope.cancel()
            await trio.sleep_forever()
        fds = self._channel.take_fds()
        if len(fds) != 3:
            close_fds(fds)
            raise RuntimeError(f"attach carried {len(fds)} descriptors, not 3")
        _attach(message, fds, self._recorder)
        self._nursery.start_soon(_watch, self._channel)
        prompt: str = message["prompt"]
        return prompt


async def _warm(agent: ta.Agent) -> None:
    """Until the agent's warmup ended (it started inside ``open_agent``)."""
    with trio.move_on_after(float(os.environ.get("TRIO_AGENT_DAEMON_WARMUP_BOUND") or WARMUP_BOUND)):
        async with agent.events.subscribe() as events:
            async for event in events:
                if event.kind in (ta.EventKind.MODEL_WARMUP_COMPLETED, ta.EventKind.MODEL_WARMUP_FAILED):
                    return


def _attach(message: dict[str, Any], fds: list[int], recorder: _Recorder) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    close_fds(fds)
    os.environ.clear()
    os.environ.update(message["env"])
    if os.environ.get("TRIO_AGENT_DAEMON_VERBOSE", "0") not in ("", "0"):
        # Said here, before anything of the run, not by the client after the daemon's "ok":
        # the client's stderr is this worker's now, and the two writers would interleave.
        os.write(2, b"trio-agent: served by the warm daemon\n")
    assert sys.__stdout__ is not None and sys.__stderr__ is not None
    # Python chose stdout's buffering for the daemon's log file; the client's may be a terminal.
    sys.__stdout__.reconfigure(line_buffering=os.isatty(1))
    recorder.attached = True
    recorder.replay()
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__


def _silence() -> None:
    """Let go of the client's descriptors (fds 0-2 become /dev/null)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    devnull = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(devnull, target)
    os.close(devnull)


async def _watch(channel: LineSocket) -> None:
    """During the run: ``detach`` (or the daemon going away) cancels it as Ctrl-C would."""
    message = await channel.message()
    if message is None or message.get("op") == "detach":
        _silence()
        os.kill(os.getpid(), signal.SIGINT)  # the CLI's own handling: cancel; a second one exits now


async def _serve(fd: int, args: Any, settings: Any, interrupts: Interrupts, recorder: _Recorder) -> None:
    from ..cli._run import run_command

    channel = LineSocket(trio.socket.from_stdlib_socket(socket.socket(fileno=fd)))
    code: int | None = None
    async with trio.open_nursery() as nursery:
        hold = _Hold(channel, recorder, nursery)
        code = await run_command(args, settings, interrupts, hold=hold)
        nursery.cancel_scope.cancel()
    if code is not None:
        if recorder.attached:
            _silence()
        try:
            await channel.send_message({"op": "exit", "code": code})
        except OSError:
            pass
    channel.close()


def main(argv: list[str] | None = None) -> None:
    from ..cli._main import _parsers
    from ..cli._run_options import run_settings

    fd, *run_argv = sys.argv[1:] if argv is None else argv
    recorder = _Recorder()
    sys.stdout, sys.stderr = recorder.stream(1), recorder.stream(2)
    parser, run_parser, _serve_parser = _parsers()
    try:
        args = parser.parse_args(run_argv)
        settings = run_settings(run_parser, args, os.environ)
        warnings.filterwarnings("ignore", message="trio_agent: commands run without a sandbox",
                                category=RuntimeWarning)
        trio.run(_serve, int(fd), args, settings, Interrupts(), recorder)
    finally:
        if not recorder.attached:  # it never served a client: what it printed goes to the daemon's log
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            recorder.replay()
