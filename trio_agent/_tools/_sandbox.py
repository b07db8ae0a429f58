"""Running a command inside a Bubblewrap sandbox, and finding out whether that works here.

Theory of operation (issue 14; reference: codex's Linux sandbox, ``codex.md``). A
sandboxed command is ``bwrap <flags> -- shell -c cmd`` started by the subreaper
supervisor like any command (``_subreaper.py``). The flags build, per command:

* a **PID namespace** (``--unshare-pid``): bwrap's own init is pid 1 and the shell
  its child; when the shell exits, or the init is killed, the kernel kills every
  process left in the namespace -- ``setsid`` daemons and double forks included --
  and ``--die-with-parent`` does the same if the outer bwrap dies. The command sees
  only its own processes in ``/proc`` (a fresh one, ``--proc /proc``), so the agent's
  ``/proc/<pid>/environ`` is not there to read;
* a **mount namespace**: the whole filesystem read-only (``--ro-bind / /``, submounts
  included), a fresh minimal ``/dev`` and then, in ``workspace-write``, writable binds
  of the workspace, a private temp dir as ``/tmp`` (one per ``ShellSessions``, removed
  when they close) and ``Sandbox.writable_roots``, with ``.git`` (and the git dir a
  ``.git`` file points to) bound read-only again unless ``writable_git``, and what
  decides what runs unconfined later bound read-only always (:func:`state_paths`:
  ``.codex`` and ``.agents`` of each writable root, trio-agent's and codex's homes
  where a writable root holds them; a missing one cannot be kept from being created
  with ``bwrap`` 0.8 without litter in the workspace, so one a command creates is
  moved aside once it ends: ``_sandbox_state``). In
  ``read-only`` nothing is rebound writable, ``/dev`` is remounted read-only too, and
  ``/tmp`` is an empty read-only directory (the workspace bound back if below it). In
  both, the agent's own installation (``sys.prefix``, ``sys.base_prefix`` and the
  directory holding the ``trio_agent`` package) is bound back read-only where a hidden
  ``/tmp`` would hide it: a virtualenv or checkout under ``/tmp`` stays usable by the
  commands (``python``, ``trio-agent`` itself);
* **nothing of the user's services** (issue 21, ``_sandbox_hide``): the runtime
  directories (``/run/user``, ``$XDG_RUNTIME_DIR``), the warm daemon's directory and
  the ssh-agent's are empty read-only directories, the system services' sockets under
  ``/run`` are masked in a ``/run`` rebuilt per command (``_sandbox_run``: it comes
  first, so that what is bound into ``/run`` lands inside it, and is sealed read-only
  last), and the kernel-wide knobs of
  ``/proc`` (``/proc/sys`` and the like) are read-only whatever the uid -- as root
  there is no user namespace, and uid 0 would pass their owner checks;
* a **network namespace** with only a loopback interface unless ``network=True``
  (``--unshare-net``), an IPC namespace, and no capabilities (``--cap-drop ALL``: as
  root, bwrap would otherwise keep them, and ``CAP_SYS_ADMIN`` could remount ``/``).

Outside the sandbox stay: reading every file the agent's user can read (but the
hidden directories); Unix-domain sockets elsewhere (system services', sockets under
``$HOME``: ``_sandbox_hide`` lists them); the agent's uid (root stays uid 0, without
capabilities). The environment is still scrubbed and the output redacted
(``_shell_env``); ``TMPDIR`` is ``/tmp``.

Detection (:func:`resolve_sandbox`) runs once per agent at its start, synchronously:
``bwrap`` on ``$PATH`` (or ``Sandbox.bwrap``), then a trial ``bwrap <the same
namespaces> -- /bin/sh -c :``. A trial that worked is remembered for the process
(per executable and network setting), so later agents pay nothing; the first one
blocks for one sandboxed spawn (a few ms; bounded by :data:`PROBE_TIMEOUT` of the OS
clock, as it is a separate process that Trio cannot wait on without a thread -- and
a thread wait would let ``MockClock`` jump past every deadline). ``open_agent``
starts that trial ahead (:func:`start_probe`) and builds the agent while it runs, so
the wait is mostly overlapped. A configured mode
that cannot work raises :class:`SandboxUnavailable`; the default (``sandbox=None``)
falls back to ``danger-full-access`` and says why (:attr:`Resolution.fallback`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from .._bounded_read import read_regular_prefix
from .._errors import ConfigError
from .._record import Record
from ._bwrap_help import note
from ._security import Sandbox, SandboxMode

__all__ = [
    "PROBE_TIMEOUT",
    "SANDBOX_ENV",
    "SCAFFOLD_DEPTH",
    "STATE_NAMES",
    "Confinement", "Resolution", "SandboxUnavailable", "agent_homes", "argv_fds", "bwrap_argv", "protected_paths",
    "release_fds", "released", "resolve_sandbox", "settle_of", "start_probe", "state_paths",
]

#: Seconds the trial run may take (OS clock: see the module docstring).
PROBE_TIMEOUT = 10.0
#: Processes of the sandbox itself above the shell: the outer bwrap and its init.
SCAFFOLD_DEPTH = 2
#: Variables every sandboxed command gets (before the caller's overrides).
SANDBOX_ENV = {"TMPDIR": "/tmp"}
_INSTALL_HINT = "install Bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
_DOTGIT_LIMIT = 64 * 1024  # a .git file is one line
#: Directories at the top of each writable root that commands may not write (state_paths).
STATE_NAMES = (".codex", ".agents")
_working: set[tuple[str, bool]] = set()  # trial runs that worked in this process
_probes: dict[tuple[str, bool], subprocess.Popen[bytes]] = {}  # trial runs started ahead (start_probe)


class SandboxUnavailable(ConfigError):
    """Raised by ``open_agent`` when the configured sandbox mode cannot work on this
    machine (no ``bwrap``, or it cannot create its namespaces). The message says what
    is missing and how to opt out (``sandbox=ta.SandboxMode.DANGER_FULL_ACCESS``)."""


class Confinement(Record):
    """An agent's effective sandbox: the settings and the ``bwrap`` that enforces them
    (None for ``danger-full-access``)."""

    __slots__ = ("sandbox", "bwrap")  # noqa: RUF023  # field order

    def __init__(self, sandbox: Sandbox, bwrap: str | None = None) -> None:
        self.sandbox = sandbox
        self.bwrap = bwrap

    @property
    def confined(self) -> bool:
        return self.bwrap is not None and self.sandbox.confined

    def wrap(self, argv: list[str], workspace: Path, workdir: Path, private_tmp: Path | None) -> list[str]:
        """``argv`` as a sandboxed command (unchanged when not confined)."""
        if self.bwrap is None or not self.sandbox.confined:
            return argv
        return bwrap_argv(self.bwrap, self.sandbox, workspace, workdir, private_tmp, argv)


class BwrapArgv(list[str]):
    """A ``bwrap`` command line and the descriptors it names (the rebuilt ``/run``'s,
    ``_sandbox_run``): the spawn passes them at the same numbers, then the caller
    closes them (:func:`argv_fds`); ``settle``: what to do once the command's sandbox
    is gone (``_sandbox_state``: the agents' state it may have created)."""

    __slots__ = ("fds", "settle")

    def __init__(self, argv: list[str], fds: list[int], settle: Callable[[], str | None] | None = None) -> None:
        super().__init__(argv)
        self.fds, self.settle = fds, settle


def settle_of(argv: list[str]) -> Callable[[], str | None] | None:
    """What to check once a wrapped ``argv``'s sandbox is gone (None: nothing)."""
    return argv.settle if isinstance(argv, BwrapArgv) else None


def argv_fds(argv: list[str]) -> list[int]:
    """The descriptors a wrapped ``argv`` names (none for an unwrapped one)."""
    return argv.fds if isinstance(argv, BwrapArgv) else []


def release_fds(argv: list[str]) -> None:
    """Close the descriptors a wrapped ``argv`` names, once its spawn is over (idempotent)."""
    fds = argv_fds(argv)
    while fds:
        os.close(fds.pop())


@contextlib.contextmanager
def released(argv: list[str]) -> Iterator[list[str]]:
    """``argv``, its descriptors closed when the block ends (its spawn is over)."""
    try:
        yield argv
    finally:
        release_fds(argv)


class Resolution(Record):
    """What :func:`resolve_sandbox` found: the confinement, and why the default fell
    back to ``danger-full-access`` (None if it did not)."""

    __slots__ = ("confinement", "fallback")

    def __init__(self, confinement: Confinement, fallback: str | None = None) -> None:
        self.confinement = confinement
        self.fallback = fallback


def _namespace_flags(sandbox: Sandbox) -> list[str]:
    flags = ["--die-with-parent", "--unshare-pid", "--unshare-ipc"]
    if not sandbox.network:
        flags.append("--unshare-net")
    return [*flags, "--cap-drop", "ALL"]


def bwrap_argv(
    bwrap: str, sandbox: Sandbox, workspace: Path, workdir: Path, private_tmp: Path | None, argv: list[str],
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """The full ``bwrap`` command line for ``argv`` (pure but for a few ``stat`` calls,
    creating a missing daemon directory and the descriptors of the rebuilt ``/run``,
    which the caller passes and closes: :func:`argv_fds`; ``environ``, default
    ``os.environ``: the agent's, which says where its runtime directory and warm
    daemon are)."""
    from . import _sandbox_hide as hide
    from ._sandbox_fds import bwrap_options
    from ._sandbox_run import run_flags
    from ._sandbox_state import watch_state

    env = os.environ if environ is None else environ
    read_only = sandbox.mode is not SandboxMode.WORKSPACE_WRITE
    hidden = hide.hidden_roots(env, hide_tmp=read_only)
    args: list[str] = []
    for root in hidden:
        args += ["--tmpfs", root]  # read-only once what it must show is bound into it
    if read_only:
        # Nothing rebound writable, and /dev read-only too (no /dev/shm either); the
        # workspace, the working directory and the agent's own installation are bound
        # back if a hidden root holds them.
        replaced = hidden
        shown = [str(p) for p in dict.fromkeys((workspace, workdir))
                 if any(hide.inside(hide.real(str(p)), root) for root in hidden)]
        shown += [path for path in hide.installation_below(replaced) if path not in shown]
        for path in shown:
            args += ["--ro-bind", path, path]
        args += ["--remount-ro", "/dev"]
    else:
        replaced = [*hidden, "/tmp"] if private_tmp is not None else hidden
        shown, binds = _writable_binds(sandbox, workspace, private_tmp, hide.installation_below(replaced), env)
        args += binds
    for root in hidden:
        args += ["--remount-ro", root]
    args += hide.socket_masks(env, replaced, shown)
    # /run rebuilt first, so that what is bound into it lands inside
    run = run_flags(replaced, shown, options=bwrap_options(bwrap))
    own_home, codex_home = agent_homes(env)  # codex's is moved aside too: trio-agent never creates it
    watch = watch_state(sandbox, workspace, STATE_NAMES, [codex_home], own=[own_home])
    return BwrapArgv([bwrap, *_namespace_flags(sandbox), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                      *hide.proc_flags(), *run.rebuild, *args, *run.in_place, *run.seal,
                      "--chdir", str(workdir), "--", *argv], run.fds, watch.settle if watch is not None else None)


def _writable_binds(
    sandbox: Sandbox, workspace: Path, private_tmp: Path | None, installation: list[str], env: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """``workspace-write``'s binds: the private ``/tmp`` first (the workspace may lie
    below ``/tmp``), the agent's installation read-only where ``/tmp`` hid it (before
    the writable roots, which it may hold: a checkout that is its own workspace), the
    writable roots, then ``.git`` and the agents' state (:func:`state_paths`) read-only
    again; and the host paths they show."""
    args = ["--bind", str(private_tmp), "/tmp"] if private_tmp is not None else []
    for shown_path in installation:
        args += ["--ro-bind", shown_path, shown_path]
    writable = [workspace, *sandbox.writable_roots]
    for root in writable:
        args += ["--bind", str(root), str(root)]
    shown = [*installation, *(str(root) for root in writable)]
    kept = [*(protected_paths(writable) if not sandbox.writable_git else ()), *state_paths(writable, env)]
    for path in dict.fromkeys(kept):
        args += ["--ro-bind", str(path), str(path)]
        shown.append(str(path))
    return shown, args


def agent_homes(environ: Mapping[str, str]) -> list[str]:
    """Where trio-agent and codex keep their state: ``$TRIO_AGENT_HOME`` else
    ``~/.trio-agent``, ``$CODEX_HOME`` else ``~/.codex`` (absolute paths)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    homes = [environ.get("TRIO_AGENT_HOME") or os.path.join(home, ".trio-agent"),
             environ.get("CODEX_HOME") or os.path.join(home, ".codex")]
    return [os.path.abspath(os.path.expanduser(path)) for path in homes]


def state_paths(roots: list[Path], environ: Mapping[str, str]) -> list[Path]:
    """What of a writable root stays read-only because it decides what runs unconfined
    later (issue 21's review, sec4): codex's project config and skills (``.codex``,
    ``.agents`` of each root: codex keeps them read-only too -- a ``config.toml`` there
    names MCP servers and a model provider), and the homes where trio-agent and codex
    keep sessions, threads, logins and settings (``$TRIO_AGENT_HOME`` else
    ``~/.trio-agent``, ``$CODEX_HOME`` else ``~/.codex``) where a root holds them (a
    workspace that is the home directory): a command could otherwise rewrite a stored
    thread's sandbox to ``danger-full-access`` for its next resume. Existing
    directories only, by their real path; a home that *is* a root is left writable."""
    reals = [os.path.realpath(root) for root in roots]
    candidates = [os.path.join(root, name) for root in reals for name in STATE_NAMES]
    candidates += agent_homes(environ)
    found: list[Path] = []
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if os.path.isdir(real) and any(real != root and real.startswith(root.rstrip("/") + "/") for root in reals):
            found.append(Path(real))
    return list(dict.fromkeys(found))


def protected_paths(roots: list[Path]) -> list[Path]:
    """``.git`` of each writable root, and the git dir a ``.git`` file points to when it
    lies inside a writable root (a worktree's ``gitdir:``)."""
    found: list[Path] = []
    for root in roots:
        dotgit = root / ".git"
        if not os.path.lexists(dotgit):
            continue
        found.append(dotgit)
        if not dotgit.is_symlink():
            target = _gitdir_target(dotgit)
            if target is not None and target.exists() and any(target.is_relative_to(r) for r in roots):
                found.append(target)
    return list(dict.fromkeys(found))


def _gitdir_target(dotgit: Path) -> Path | None:
    """Where a ``.git`` *file* points (None: a directory, or no pointer). It is read in
    the agent's process, per command, and a command may have made it (a workspace
    without git): one open without following or waiting, a regular file only, at most
    :data:`_DOTGIT_LIMIT` bytes -- not a FIFO that blocks the event loop, not a sparse
    terabyte read into memory."""
    try:
        data = read_regular_prefix(dotgit, _DOTGIT_LIMIT, follow=False)
    except OSError:
        return None
    if data is None:
        return None
    text = data.decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            return Path(os.path.realpath(dotgit.parent / line.removeprefix("gitdir:").strip()))
    return None


# -- detection ---------------------------------------------------------------------------------


def resolve_sandbox(requested: Sandbox | None) -> Resolution:
    """The effective sandbox for ``requested`` (None: the default, ``workspace-write``
    when a sandbox works here, else ``danger-full-access`` with the reason).

    Raises:
      SandboxUnavailable: a configured sandbox mode cannot work here.
    """
    sandbox = requested if requested is not None else Sandbox()
    if not sandbox.confined:
        return Resolution(Confinement(sandbox))
    bwrap, problem = _find_bwrap(sandbox)
    if bwrap is not None:
        problem = _trial(bwrap, sandbox)
        if problem is None:
            return Resolution(Confinement(sandbox, bwrap))
    assert problem is not None
    if requested is None:
        fallback = Sandbox(SandboxMode.DANGER_FULL_ACCESS)
        return Resolution(Confinement(fallback), fallback=f"{problem}; to confine commands, {_INSTALL_HINT}")
    raise SandboxUnavailable(
        f"sandbox mode {sandbox.mode.value!r} cannot work here: {problem}. To run commands in it, "
        f"{_INSTALL_HINT} and make sure user namespaces are allowed; to run them unconfined instead, "
        "pass AgentConfig(sandbox=ta.SandboxMode.DANGER_FULL_ACCESS)"
    )


def _find_bwrap(sandbox: Sandbox) -> tuple[str | None, str | None]:
    if not sys.platform.startswith("linux"):
        return None, f"the sandbox needs Linux namespaces (Bubblewrap), and this is {sys.platform}"
    name = sandbox.bwrap or "bwrap"
    found = shutil.which(name)
    if found is None:
        where = name if sandbox.bwrap else "bwrap on $PATH"
        return None, f"Bubblewrap is not installed ({where} was not found)"
    return os.path.realpath(found), None


def start_probe(requested: Sandbox | None) -> None:
    """Start the trial run ``resolve_sandbox(requested)`` will need, without waiting
    for it: ``open_agent`` builds the agent (and imports its transport) while ``bwrap``
    sets up its namespaces, and ``resolve_sandbox`` then only collects the answer.
    Nothing to start when it needs no trial (unconfined, no ``bwrap``, one already
    worked in this process, one already under way)."""
    sandbox = requested if requested is not None else Sandbox()
    if not sandbox.confined:
        return
    bwrap, _problem = _find_bwrap(sandbox)
    if bwrap is None:
        return
    key = (bwrap, sandbox.network)
    if key in _working or key in _probes:
        return
    try:
        _probes[key] = subprocess.Popen(
            _probe_argv(bwrap, sandbox), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError:
        return  # resolve_sandbox runs it again and says why it could not


def _probe_argv(bwrap: str, sandbox: Sandbox) -> list[str]:
    from ._sandbox_hide import proc_flags  # the binds over /proc too: they are the unusual mounts

    # the no-op: bwrap's own --help, inside the sandbox it tries -- one process says whether
    # the sandbox works and which options this bwrap has (_bwrap_help)
    return [bwrap, *_namespace_flags(sandbox), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            *proc_flags(), "--", bwrap, "--help"]


def _trial(bwrap: str, sandbox: Sandbox) -> str | None:
    """Run one sandboxed no-op (``bwrap --help``) with the namespaces commands get (or
    collect the one ``start_probe`` started); why it failed, or None."""
    key = (bwrap, sandbox.network)
    if key in _working:
        return None
    probe = _probes.pop(key, None)
    try:
        if probe is None:
            done = subprocess.run(
                _probe_argv(bwrap, sandbox), stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT,
                check=False,
            )
            returncode, out, stderr = done.returncode, done.stdout, done.stderr
        else:
            with probe:
                try:
                    out, stderr = probe.communicate(timeout=PROBE_TIMEOUT)
                except subprocess.TimeoutExpired:
                    probe.kill()
                    raise
            returncode = probe.returncode
    except subprocess.TimeoutExpired:
        return f"a trial run of {bwrap} gave no answer within {PROBE_TIMEOUT:g} s"
    except OSError as exc:
        return f"{bwrap} could not be run: {exc}"
    if returncode != 0:
        said = stderr.decode(errors="replace").strip() or "no message"
        return f"a trial run of {bwrap} failed (exit {returncode}): {said}"
    _working.add(key)
    note(bwrap, out.decode(errors="replace"))  # the options the rebuilt /run may use, for the first command
    return None
