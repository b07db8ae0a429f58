"""The login shell's environment, taken once and given to every command.

Theory of operation (issue 24 item 5). ``exec_command`` runs commands in a *login*
shell by default (``login: true``, as codex does), so that they see what the user's
profile sets up: ``PATH`` entries for pyenv, nvm, cargo, Homebrew; exported variables.
Running the profile *for every command* has a cost besides the time: whatever it prints
becomes part of the command's output, which the user sees and the model reads. On a
pyenv machine every sandboxed command used to begin with ``pyenv: cannot rehash: ...
isn't writable`` (the profile's ``pyenv init`` writes its shims under ``$HOME``, which is
read-only in the sandbox).

So the profile runs once, apart from any command (as codex's *shell snapshot* does):
the first ``login: true`` command of a :class:`~.exec_command.ShellSessions` starts
``shell -lc 'printf <marker>; exec env -0'`` -- in the same sandbox, working directory
and scrubbed environment as the command itself, so the profile is no more trusted than
before -- and reads what it printed after the marker: the environment the profile left,
NUL-separated. Everything before the marker (the profile's stdout and stderr, which
share the pipe) is discarded. The command, and every later ``login: true`` command with
the same shell, sandbox and agent environment, then runs as ``shell -c cmd`` with that
environment, scrubbed and redacted as the agent's own (``_shell_env``: a token the
profile exports is dropped and its value redacted like one in the agent's environment),
with the forced plain-output variables and the caller's overrides applied on top again.
``PWD``, ``OLDPWD``, ``SHLVL`` and ``_`` are the shell's own and are not carried over.

What carries over is what a child process inherits: exported variables (exported bash
functions, ``BASH_FUNC_*``, included). Functions, aliases and shell options the profile
defines but does not export, its ``umask`` and ``ulimit``, are not (a command that
needs them can source the profile itself: ``. ~/.bash_profile && ...``).
The snapshot is not refreshed: a profile edited during the session is read by the next
agent (or by a change of shell, sandbox or environment, which takes a new snapshot).

Bounds and hygiene. Login shells' init scripts take locks (pyenv's rehash does), and a
shell killed while it holds one leaves it behind for every later login shell. So the
snapshot is never cancelled because its caller was: it runs shielded, and waits up to
:data:`SNAPSHOT_TIMEOUT` (10 s, as codex's) for the profile to finish. Then whatever
is still running -- a profile that hangs, or what it started in the background -- is
terminated as a command's leftovers are (TERM, then KILL after
:data:`SNAPSHOT_KILL_GRACE`, time enough for an ``EXIT`` trap to release its lock). Its stdin
is closed, so a profile that reads one gets EOF instead of hanging. Only one snapshot
runs at a time (a lock), so a burst of first commands starts one login shell; the
others wait for it (that wait is cancellable). ``ShellSessions.aclose`` waits for a
snapshot under way before it stops the process launcher.

Failure. If the login shell times out, exits non-zero, prints no parsable environment
or more than :data:`MAX_SNAPSHOT_BYTES`, commands fall back to what they did before --
each runs as ``shell -lc cmd``, start-up output included -- and the failure is reported
once, through ``on_warning`` (the agent emits it as an ``api.warning`` with code
``shell_login_environment``). The failure is remembered, so a hanging profile costs one
timeout, not one per command. A shell that cannot be started at all is not a snapshot
failure: the command reports that itself (``exit_code`` 1).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import final

import trio

from ._command_process import CommandProcess
from ._real_time import real_process_running
from ._shell_env import ShellEnvironment, build_environment

__all__ = [
    "CACHE_SIZE",
    "MAX_SNAPSHOT_BYTES",
    "SHELL_OWN_VARIABLES",
    "SNAPSHOT_KILL_GRACE",
    "SNAPSHOT_TIMEOUT",
    "LoginEnvironments",
    "login_command_environment",
    "parse_snapshot",
    "snapshot_argv",
    "take_snapshot",
]

#: Seconds the login shell may take to start and report its environment (codex: 10 s).
SNAPSHOT_TIMEOUT = 10.0
#: Seconds between TERM and KILL for what a snapshot left running (time for EXIT traps).
SNAPSHOT_KILL_GRACE = 2.0
#: Seconds to wait for the output pipe's EOF once the login shell has exited.
SNAPSHOT_DRAIN = 0.5
#: A profile printing more than this while it starts is not snapshotted.
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024
#: Variables every shell sets for itself; never carried from the snapshot to a command.
SHELL_OWN_VARIABLES = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
#: Snapshots kept (one per shell, sandbox and agent environment); the oldest is forgotten.
CACHE_SIZE = 8
_MARKER = "trio-agent-login-environment:"
_READ_SIZE = 64 * 1024

#: Starts ``argv`` as a command would be started (sandboxed, in its workdir, its environment).
Spawn = Callable[[list[str]], Awaitable[CommandProcess]]


def snapshot_argv(shell: str, nonce: str) -> list[str]:
    """``shell -lc`` printing the marker for ``nonce``, then its environment (``env -0``).

    The marker is printed from two arguments, so the script's own text (which a profile
    could echo: ``$BASH_EXECUTION_STRING``) does not contain it."""
    return [shell, "-lc", f"printf '%s%s\\n' '{_MARKER}' '{nonce}' && exec env -0"]


def parse_snapshot(output: bytes, nonce: str) -> dict[str, str] | None:
    """The environment printed after the marker for ``nonce`` (without
    :data:`SHELL_OWN_VARIABLES`), or None if there is no such marker or what follows it
    is not a complete ``env -0`` listing."""
    marker = f"{_MARKER}{nonce}\n".encode()
    start = output.find(marker)
    if start < 0:
        return None
    body = output[start + len(marker):]
    if not body.endswith(b"\0"):
        return None
    env: dict[str, str] = {}
    for entry in body[:-1].split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if not sep or not name:
            return None
        env[os.fsdecode(name)] = os.fsdecode(value)
    return {name: value for name, value in env.items() if name not in SHELL_OWN_VARIABLES}


def login_command_environment(
    base: ShellEnvironment, login_env: Mapping[str, str], overrides: Mapping[str, str],
    forced: Mapping[str, str],
) -> ShellEnvironment:
    """A command's environment from the snapshot: scrubbed like the agent's (but for the
    caller's overrides, which are neither scrubbed nor redacted), ``FORCED_ENV``,
    ``overrides`` and ``forced`` (the sandbox's ``TMPDIR``) on top; redacting the
    secrets of both the agent's environment and the profile's."""
    scrubbed = build_environment({k: v for k, v in login_env.items() if k not in overrides}, overrides)
    env = {**scrubbed.env, **forced}
    found = set(base.secrets) | set(scrubbed.secrets)
    ordered = tuple(sorted(found, key=lambda secret: (-len(secret), secret)))
    return ShellEnvironment(env=env, secrets=ordered)


async def _read_snapshot(process: CommandProcess, seconds: float) -> tuple[bytes, int | None, str | None]:
    """Everything ``process`` printed, its exit code, and why it is unusable (None: it
    exited within ``seconds`` without printing too much)."""
    output = bytearray()
    eof = trio.Event()
    too_much = False

    async def pump() -> None:
        nonlocal too_much
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while data := await process.stdout.receive_some(_READ_SIZE):
                if len(output) + len(data) > MAX_SNAPSHOT_BYTES:
                    too_much = True  # read on (so the profile is not blocked), keep nothing more
                else:
                    output.extend(data)
        eof.set()

    code: int | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump)
        with trio.move_on_after(seconds) as deadline:
            code = await process.wait()
            with trio.move_on_after(SNAPSHOT_DRAIN):
                await eof.wait()
        nursery.cancel_scope.cancel()
    if deadline.cancelled_caught:
        return bytes(output), code, f"did not finish starting within {seconds:g} s"
    if too_much:
        return bytes(output), code, f"printed more than {MAX_SNAPSHOT_BYTES} bytes while starting"
    return bytes(output), code, None


async def take_snapshot(shell: str, spawn: Spawn, seconds: float) -> dict[str, str] | str:
    """The environment ``shell``'s profile leaves, or why it could not be taken.

    Shielded (a login shell is never cancelled while it starts) and bounded by
    ``seconds`` plus the kill grace. Raises OSError if the shell cannot be started."""
    nonce = secrets.token_hex(8)
    with trio.CancelScope(shield=True), real_process_running():
        process = await spawn(snapshot_argv(shell, nonce))
        try:
            await process.stdin.aclose()  # a profile reading stdin gets EOF
            output, code, problem = await _read_snapshot(process, seconds)
        finally:
            await process.terminate(SNAPSHOT_KILL_GRACE)  # what the profile left running
            await process.aclose()
    if problem is None and code != 0:
        problem = f"exited with status {code} before it reported its environment"
    if problem is not None:
        return problem
    env = parse_snapshot(output, nonce)
    if env is None:
        return "did not report its environment (`env -0` printed nothing usable)"
    return env


@final
class LoginEnvironments:
    """The snapshots of one ``ShellSessions``: taken on first use, one at a time,
    remembered (failures too) for :data:`CACHE_SIZE` keys.

    ``on_warning`` receives one message per failed snapshot (default: a
    ``RuntimeWarning``)."""

    def __init__(self, timeout: float = SNAPSHOT_TIMEOUT, on_warning: Callable[[str], None] | None = None) -> None:
        self._timeout = timeout
        self._on_warning = on_warning
        self._lock = trio.Lock()
        self._cache: dict[Hashable, dict[str, str] | None] = {}  # None: failed, use a login shell
        self._closed = False

    async def environment(
        self, shell: str, where: Hashable, base: Mapping[str, str], spawn: Spawn
    ) -> dict[str, str] | None:
        """The login environment for ``shell`` run ``where`` (the sandbox) with ``base``,
        or None: run the command in a login shell (the snapshot failed, the shell cannot
        be started, or these sessions are closing)."""
        key = (shell, where, tuple(sorted(base.items())))
        async with self._lock:
            if self._closed:
                return None
            if key in self._cache:
                self._cache[key] = self._cache.pop(key)  # most recently used last
                return self._cache[key]
            try:
                taken = await take_snapshot(shell, spawn, self._timeout)
            except OSError:
                return None  # not cached: the command says why it cannot start
            found = taken if isinstance(taken, dict) else None
            self._cache[key] = found
            while len(self._cache) > CACHE_SIZE:
                del self._cache[next(iter(self._cache))]
        if isinstance(taken, str):
            self._warn(f"the login shell {shell} -l {taken}; commands run in a login shell each "
                       "(-lc) instead, so what its start-up prints is part of their output")
        return found

    def _warn(self, message: str) -> None:
        if self._on_warning is not None:
            self._on_warning(message)
        else:
            import warnings

            warnings.warn(f"trio_agent: {message}", RuntimeWarning, stacklevel=2)

    async def aclose(self) -> None:
        """No more snapshots; wait (shielded, bounded) for one under way to finish."""
        self._closed = True
        bound = self._timeout + SNAPSHOT_KILL_GRACE + SNAPSHOT_DRAIN + 5
        with trio.CancelScope(shield=True), trio.move_on_after(bound):
            async with self._lock:
                pass

