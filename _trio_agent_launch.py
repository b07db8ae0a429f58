"""The ``trio-agent`` console script: a thin client of the warm daemon, else the CLI.

This module is the console script's target and what ``python -m trio_agent`` runs
first. It imports the standard library only -- and of it only what the interpreter
has already loaded plus the C modules ``_socket`` and ``_signal`` -- never trio nor
``trio_agent`` (whose ``__init__`` imports the whole runtime), so that ``trio-agent run PROMPT``
against a running daemon costs an interpreter start-up and one Unix-socket round
trip before the prewarmed agent sends the prompt.

Theory of operation. :func:`main` looks at the command line just enough to tell
whether this is a ``run`` the daemon can take (:func:`prompt_index`: the options it
knows, exactly one prompt; ``--otel``, ``--record``, ``--instructions @FILE``,
``--ask-for-approval`` other than ``never``, ``--help`` and anything it does not know
stay in-process). If so, and the daemon's socket answers, it sends the request --
argv, working directory, environment -- together with its own stdin, stdout and
stderr file descriptors (``SCM_RIGHTS``), and waits. The daemon hands the request to
a prewarmed worker process that runs the very same ``run`` code as the in-process
path, writing to those descriptors: the output, ``isatty`` and the terminal's width
are the client's by construction. The daemon then sends back the exit status, which
the client exits with. In every other case -- no daemon directory, no socket,
connection refused (a stale socket), an answer of ``fallback`` (no prewarmed agent
for this configuration yet: the daemon starts one for next time), an unsupported
option, ``TRIO_AGENT_NO_DAEMON=1`` -- it imports the CLI (``trio_agent.cli.main``) and
runs the command in this process, unchanged.

``trio-agent --version`` is answered here, from :data:`__version__` (the distribution's
version: pyproject.toml reads it from this file), without importing ``trio_agent``.

Signals: a Ctrl-C before the command's own handling begins -- while this module looks
for the daemon, or while the CLI is being imported -- is exit status 130 and the
CLI's one line ``-- cancelled by Ctrl-C``, no traceback (``trio_agent.cli.main`` does
the same from then on). Only the interpreter's own start-up and the console script's
``import re`` (pip writes that script) come before this module runs.
Once the daemon accepted the run, SIGINT and SIGTERM are forwarded to it
(``signal N``); the worker gets the same signal, so the first one cancels the turn
and prints the ``-- cancelled ...`` line and the second exits at once, as in-process.
Should the daemon not answer within 2 s of a second signal, the client exits itself.
If the client goes away, the daemon cancels its run (and only that).

Wire format (client <-> daemon, one Unix stream socket per request): the request is
``LENGTH\\n`` then ``LENGTH`` bytes of NUL-separated fields: ``run``, the working
directory, the index of the prompt in argv, the number of argv entries, the argv
entries, then ``NAME=VALUE`` environment entries (none of these can hold a NUL).
The daemon answers with lines: ``ok`` (accepted) or ``fallback REASON``, then
``exit N``; or, to any request of a client it does not serve (one in a sandbox:
``trio_agent._daemon._peer``), ``refused REASON`` before it reads the request (the
client says so on stderr and runs in-process). The client may send ``signal N`` lines. ``status`` and ``stop`` requests
(used by ``trio-agent serve --daemon/--stop``) carry just the op.

Installations (:func:`build_identity`): the second field of a ``run`` request names the
installation the client runs from -- the wire format's version and the on-disk
identity of the ``trio_agent/__init__.py`` that ``import trio_agent`` loads in this
process (:func:`package_init`; an upgrade or a reinstall rewrites it). The daemon
computed the same when it started; a daemon started from another installation would
serve old code (its workers, new code), so it answers ``fallback stale ...`` and keeps
serving whoever else it serves; the client runs in-process and says once per run, on
stderr, that the daemon needs a restart (``trio-agent serve --daemon`` replaces a stale
daemon; ``TRIO_AGENT_DAEMON=auto`` does that itself). Code edited in place (an editable
install) is not a new installation: restart the daemon after editing the package.
The package is found as the import system finds it, not beside this file: an editable
install (``pip install -e``) puts a copy of this file in site-packages and the package
on a ``.pth`` path, and the daemon (``PYTHONPATH`` set to the package's root) imports
the checkout's copy of this file; both sides load the same ``trio_agent``. This file's
own identity is not part of it: its wire format is :data:`PROTOCOL`, and every
installation that replaces it rewrites the package too.

Socket location (:func:`daemon_directory`): ``$TRIO_AGENT_DAEMON_DIR`` if set, else
``$XDG_RUNTIME_DIR/trio-agent``, else ``/tmp/trio-agent-$UID``; the socket is
``daemon.sock`` in it. The directory must be a real directory owned by this user
with no group or other permissions (:func:`directory_problem`), since whoever owns
the socket receives prompts and credentials: a client refuses any other directory
with a one-line note on stderr and runs in-process.

``TRIO_AGENT_DAEMON_VERBOSE=1``: a ``run`` the daemon serves says so first, on stderr
(``trio-agent: served by the warm daemon``); one it does not says why (``trio-agent:
not using the daemon: ...``: no daemon answers, no prewarmed agent yet, ...). Off by
default: the output of a served run is the in-process run's, byte for byte.

``TRIO_AGENT_DAEMON=auto``: when no daemon answers, ``run`` starts one in the
background (``trio-agent serve --daemon``) and runs this prompt in-process; the
daemon prewarms an agent on the next ``run`` with the same configuration, which
itself still runs in-process, so the third is the first served warm. The default
is explicit: no daemon is started unless asked for.
"""

from __future__ import annotations

import _socket
import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing alone would double this module's start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "build_identity",
    "connect",
    "daemon_directory",
    "directory_problem",
    "encode_request",
    "main",
    "package_init",
    "prompt_index",
    "socket_path",
]

#: The distribution's version (pyproject.toml reads it from here; ``trio_agent.__version__`` is the same).
__version__ = "0.1.0"

SOCKET_NAME = "daemon.sock"
#: The version of the wire format below; part of :func:`build_identity`.
PROTOCOL = 2
#: How long a client waits for the daemon after a second Ctrl-C before exiting itself.
SECOND_SIGNAL_GRACE = 2.0

# The options of ``trio-agent run`` the daemon serves: flags, and options with a value.
# Every other option of ``run`` keeps the command in-process: --otel, --record, --help,
# -c/--config; a new option of run's parser fails tests/daemon/test_lifecycle.py until it
# is put here or among those.
_FLAGS = frozenset({"--local", "--jsonl", "--json", "--ephemeral", "--no-web-search", "--image-generation", "--network",
                    "--writable-git", "--store", "--no-store"})
_VALUED = frozenset({
    "--thinking", "--workspace", "--model", "--api-base", "--websocket-url", "--transport", "--max-attempts",
    "--profile", "--history",  # the server's dialect (generic: LiteLLM, vLLM, ...), chaining
    "--instructions", "--mcp", "--mcp-stdio", "--mcp-arg", "--sandbox", "--writable-root", "--ask-for-approval",
    # codex's spellings of the same options (trio_agent/cli/_codex.py)
    "-m", "-C", "--cd", "-s", "--add-dir", "-a",
})


def daemon_directory(environ: Mapping[str, str] | None = None) -> str:
    """The daemon's runtime directory (see the module docstring)."""
    env = os.environ if environ is None else environ
    if env.get("TRIO_AGENT_DAEMON_DIR"):
        return env["TRIO_AGENT_DAEMON_DIR"]
    if env.get("XDG_RUNTIME_DIR"):
        return os.path.join(env["XDG_RUNTIME_DIR"], "trio-agent")
    return f"/tmp/trio-agent-{os.getuid()}"


def build_identity() -> str:
    """This installation, as a daemon must have been started from it to serve us: the
    protocol version, then device, inode, size and modification time of the ``trio_agent``
    package's ``__init__.py`` -- the one this process runs (:func:`package_init`)."""
    path = package_init()
    try:
        info = os.stat(path) if path else None
    except OSError:
        info = None
    stamp = "-" if info is None else f"{info.st_dev:x}.{info.st_ino:x}.{info.st_size:x}.{info.st_mtime_ns:x}"
    return f"{PROTOCOL}/{stamp}"


def package_init() -> str | None:
    """The ``__init__.py`` of the ``trio_agent`` package this process runs: the imported
    one, else the one ``import trio_agent`` would load, found the way the import system
    finds it (``sys.meta_path``: ``sys.path`` entries, ``.pth`` paths, an editable
    install's finder) without importing it. None when there is none."""
    module = sys.modules.get("trio_agent")
    if module is not None:
        return getattr(module, "__file__", None)
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec("trio_agent", None)
        except Exception:  # a third-party finder's own failure: as if it had no answer
            continue
        if spec is not None:
            return spec.origin if spec.has_location else None
    return None


def socket_path(directory: str) -> str:
    return os.path.join(directory, SOCKET_NAME)


def directory_problem(directory: str) -> str | None:
    """Why ``directory`` cannot hold the daemon's socket (None: it can). A missing
    directory is not a problem (the daemon creates it, mode 0700)."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot inspect {directory} ({exc.strerror})"
    if (info.st_mode & 0o170000) != 0o040000:
        return f"{directory} is not a directory (a symlink or a file); remove it"
    if info.st_uid != os.getuid():
        return f"{directory} belongs to uid {info.st_uid}, not to you (uid {os.getuid()}); remove it"
    if info.st_mode & 0o077:
        return (f"{directory} is open to other users (mode {info.st_mode & 0o777:o}); "
                f"chmod 700 {directory}, or remove it")
    return None


def prompt_index(argv: list[str]) -> int | None:
    """Where the prompt is in ``argv`` (``run`` ... PROMPT ...) when the daemon can run
    this command, else None."""
    if not argv or argv[0] != "run":
        return None
    found: int | None = None
    i = 1
    while i < len(argv):
        arg = argv[i]
        name, equals, value = arg.partition("=")
        if arg.startswith("-") and arg != "-":
            if arg in _FLAGS:
                i += 1
                continue
            if name not in _VALUED:
                return None  # --otel, --record, --help, an abbreviation, `--`, ...: in-process
            if not equals:
                i += 1
                if i >= len(argv):
                    return None
                value = argv[i]
            if (name == "--instructions" and value.startswith("@")) or (
                    name in ("--ask-for-approval", "-a") and value != "never"):
                return None  # a file read at start-up, a terminal approver: in-process
        elif found is None:
            found = i
        else:
            return None  # a second positional: let argparse say what is wrong
        i += 1
    if found is None or argv[found] == "-" or not argv[found].strip():
        return None  # the prompt is on stdin, or blank (its one-line error): in-process
    return found


def encode_request(fields: list[str]) -> bytes:
    payload = "\0".join(fields).encode("utf-8", "surrogateescape")
    return f"{len(payload)}\n".encode() + payload


def connect(path: str) -> _socket.socket | None:
    """A connected socket to the daemon, or None when none answers."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:  # no socket file, refused (stale), a path too long, ...
        sock.close()
        return None
    return sock


class _Lines:
    """Lines from a ``_socket.socket`` (which has no ``makefile``)."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def next(self) -> str | None:
        while b"\n" not in self.buffer:
            data = self.sock.recv(4096)
            if not data:
                return None
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


class _SecondSignal(Exception):
    pass


def _thin(argv: list[str]) -> int | None:
    """Run ``argv`` through the daemon; None when it cannot (then: in-process)."""
    if os.environ.get("TRIO_AGENT_NO_DAEMON", "0") not in ("", "0"):
        return None
    index = prompt_index(argv)
    if index is None:
        return None
    directory = daemon_directory()
    problem = directory_problem(directory)
    if problem is not None:
        os.write(2, f"trio-agent: not using the daemon: {problem}\n".encode())
        return None
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return None  # a closed standard stream cannot be handed over
    sock = connect(socket_path(directory))
    if sock is None:
        _verbose(f"no daemon answers on {socket_path(directory)}")
        if os.environ.get("TRIO_AGENT_DAEMON") == "auto":
            _start_daemon()
        return None
    try:
        return _request(sock, argv, index)
    finally:
        sock.close()


def _request(sock: _socket.socket, argv: list[str], index: int) -> int | None:
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was removed: let the CLI say what that means
        return None
    env = [f"{name}={value}" for name, value in os.environ.items()]
    data = encode_request(["run", build_identity(), cwd, str(index), str(len(argv)), *argv, *env])
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
    lines = _Lines(sock)
    try:
        sent = sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        if sent < len(data):
            sock.sendall(data[sent:])
        reply = lines.next()
    except OSError:  # it went away before it took the run
        return None
    if reply is not None and reply.startswith("refused "):
        # A sandboxed command (trio_agent._daemon._peer): it runs in-process, in its sandbox.
        os.write(2, f"trio-agent: not using the daemon: it refused: {reply[8:]}\n".encode())
        return None
    if reply is not None and reply.startswith("fallback stale"):
        os.write(2, b"trio-agent: not using the daemon: it was started from another installation of trio-agent "
                    b"(an upgrade?); restart it with `trio-agent serve --daemon`\n")
        if os.environ.get("TRIO_AGENT_DAEMON") == "auto":
            _start_daemon()  # `serve --daemon` replaces a stale daemon
    if reply != "ok":
        _verbose(f"the daemon answered: {reply[9:]}" if reply is not None and reply.startswith("fallback ")
                 else "the daemon went away before it answered")
        return None  # "fallback ...", or the daemon went away: in-process
    # (TRIO_AGENT_DAEMON_VERBOSE's "served by the warm daemon" is the worker's to say: trio_agent._daemon._worker)
    return _wait_exit(sock, lines)


def _verbose(why: str) -> None:
    """``TRIO_AGENT_DAEMON_VERBOSE=1``: why this run is not served by the daemon."""
    if os.environ.get("TRIO_AGENT_DAEMON_VERBOSE", "0") not in ("", "0"):
        os.write(2, f"trio-agent: not using the daemon: {why}\n".encode())


def _wait_exit(sock: _socket.socket, lines: _Lines) -> int:
    if TYPE_CHECKING:  # typeshed describes `signal` only
        import signal as _signal
    else:
        import _signal  # not `signal`: it imports enum, which costs more than the rest of this module

    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        try:
            sock.sendall(f"signal {signum}\n".encode())
        except OSError:
            pass
        if len(received) >= 2:
            raise _SecondSignal

    previous = {signum: _signal.signal(signum, forward) for signum in (_signal.SIGINT, _signal.SIGTERM)}
    try:
        while True:
            try:
                line = lines.next()
                if line is not None and line.startswith("exit "):
                    return int(line[5:])
                if line is None:
                    os.write(2, b"trio-agent: the daemon went away before the run ended\n")
                    return 1
            except _SecondSignal:
                sock.settimeout(SECOND_SIGNAL_GRACE)
            except TimeoutError:  # the daemon did not act on the second signal: leave now
                _exit_now(received[-1])
            except OSError:
                os.write(2, b"trio-agent: the daemon went away before the run ended\n")
                return 1
    finally:
        for signum, handler in previous.items():
            _signal.signal(signum, handler)


def _exit_now(signum: int) -> None:
    """As ``trio_agent.cli._signals.exit_now`` says it."""
    name = "Ctrl-C" if signum == 2 else "SIGTERM"
    os.write(2, f"trio-agent: {name} again: exiting now, without waiting for cleanup\n".encode())
    os._exit(128 + signum)


def _start_daemon() -> None:
    """``TRIO_AGENT_DAEMON=auto``: ``trio-agent serve --daemon`` in the background."""
    import subprocess

    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        subprocess.Popen([sys.executable, "-m", "trio_agent", "serve", "--daemon"], stdin=devnull,
                         stdout=devnull, stderr=devnull, start_new_session=True)
    except OSError:
        pass
    finally:
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """The ``trio-agent`` command: through the daemon when one takes it, else in-process."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:  # as argparse's action would: the first option wins
        os.write(1, f"trio-agent {__version__}\n".encode())
        return 0
    try:
        _pause("start")
        code = _thin(argv)
        if code is not None:
            return code
        _pause("in-process")
        in_process = _import_cli()
        _pause("imported")
    except KeyboardInterrupt:  # before the daemon took the run, or the CLI's own handling began
        os.write(2, b"-- cancelled by Ctrl-C\n")
        return 130
    return in_process(argv)  # which turns a Ctrl-C into the same line and 130 itself


def _import_cli() -> Callable[[list[str]], int]:
    """``trio_agent.cli.main``, imported with the cycle collector off, its ~50,000 objects then
    frozen (``gc.freeze``: no later pass walks them) and the collector on before any command
    runs, whatever the import did: -7.6 % instructions to a cold run's answer. Safe: only the
    import's own temporary cycles (~2,800 objects) outlive it (docs/architecture.md, start-up)."""
    import gc
    gc.disable()
    try:
        from trio_agent.cli import main as in_process
    finally:
        gc.freeze()
        gc.enable()
    return in_process


def _pause(point: str) -> None:
    """Test-only (``TRIO_AGENT_TEST_PAUSE=POINT:FD``, FD a connected socket): at ``POINT``,
    send ``POINT\\n`` on it and wait until it is closed or a signal interrupts -- so a
    test can deliver Ctrl-C at a known moment of start-up (``tests/cli/test_launcher.py``)."""
    wanted = os.environ.get("TRIO_AGENT_TEST_PAUSE")
    if not wanted or wanted.partition(":")[0] != point:
        return
    sock = _socket.socket(fileno=int(wanted.partition(":")[2]))
    try:
        sock.sendall(f"{point}\n".encode())
        while sock.recv(1):
            pass
    finally:
        sock.close()


if __name__ == "__main__":
    raise SystemExit(main())
