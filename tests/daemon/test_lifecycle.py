"""``trio-agent serve --daemon`` / ``--stop``, the runtime directory's checks, a stale
socket, and the launcher's reading of the command line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from _trio_agent_launch import build_identity, daemon_directory, directory_problem, prompt_index

from .._os_facts import pid_alive, wait_for_os_fact, wait_gone
from ..cli._cli import COMMAND, open_cli, run_cli
from ._daemon import _wait_gone, daemon_env, normalised, running_daemon

LONG = "run: sleep 60 & touch started; wait"


@pytest.fixture
def directory() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="tad-")
    yield path
    subprocess.run([*COMMAND, "serve", "--stop"], env=daemon_env(path), capture_output=True, timeout=120, check=False)
    for name in os.listdir(path):
        os.unlink(os.path.join(path, name))
    os.rmdir(path)


async def test_a_second_start_says_one_runs_and_stop_leaves_nothing(tmp_path: Path) -> None:
    with running_daemon() as daemon:
        again = await run_cli("serve", "--daemon", cwd=tmp_path, env=daemon.env)
        assert again.returncode == 0
        assert f"a daemon is already running (pid {daemon.pid}, " in again.stdout.decode()
        status = daemon.status()
        assert status is not None and status.pid == daemon.pid
    assert not pid_alive(daemon.pid)  # running_daemon stopped it and waited for every pid it saw
    stopped = await run_cli("serve", "--stop", cwd=tmp_path, env=daemon.env)
    assert stopped.returncode == 0
    assert "no daemon is running" in stopped.stdout.decode()


async def test_stop_cancels_a_live_run_cleanly(tmp_path: Path, workspace: Path) -> None:
    with running_daemon() as daemon:
        options = ("--local", "--workspace", str(workspace))
        await daemon.prime(*options, cwd=tmp_path)
        async with open_cli("run", *options, LONG, cwd=tmp_path, env=daemon.env) as cli:
            await wait_for_os_fact((workspace / "started").exists, "the command starting")
            stopped = await run_cli("serve", "--stop", cwd=tmp_path, env=daemon.env)
            assert stopped.returncode == 0, stopped.stderr.decode()
            assert await cli.wait() == 143
        assert cli.stderr.splitlines()[-1].startswith("-- cancelled by SIGTERM after ")
        assert not pid_alive(daemon.pid)


async def test_app_server_options_do_not_configure_the_daemon(directory: str, tmp_path: Path) -> None:
    done = await run_cli("serve", "--daemon", "--local", cwd=tmp_path, env=daemon_env(directory))
    assert done.returncode == 2
    assert b"--local configures the app server; the warm daemon takes each run's own options" in done.stderr
    assert not os.listdir(directory)


async def test_a_stale_socket_falls_back_to_the_in_process_run(directory: str, tmp_path: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.path.join(directory, "daemon.sock"))
    stale.close()  # the file stays; nobody listens: connecting is refused
    env = daemon_env(directory)
    warm = await run_cli("run", "--local", "hello", cwd=tmp_path, env=env)
    local = await run_cli("run", "--local", "hello", cwd=tmp_path)
    assert warm.returncode == local.returncode == 0
    assert (normalised(warm.stdout), normalised(warm.stderr)) == (normalised(local.stdout), normalised(local.stderr))
    with running_daemon_on(directory) as pid:  # a daemon replaces the stale socket
        assert pid_alive(pid)


class running_daemon_on:  # a context manager, named like a function
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.pid = 0

    def __enter__(self) -> int:
        started = subprocess.run([*COMMAND, "serve", "--daemon"], env=daemon_env(self.directory), capture_output=True,
                                 text=True, timeout=120, check=False)
        assert started.returncode == 0, started.stdout + started.stderr
        self.pid = int(started.stdout.split("(pid ")[1].split(",")[0])
        return self.pid

    def __exit__(self, *exc: object) -> None:
        stopped = subprocess.run([*COMMAND, "serve", "--stop"], env=daemon_env(self.directory), capture_output=True,
                                 text=True, timeout=120, check=False)
        assert stopped.returncode == 0 and f"daemon stopped (pid {self.pid})" in stopped.stdout
        _wait_gone({self.pid})


async def test_an_unsafe_directory_is_refused(directory: str, tmp_path: Path) -> None:
    os.chmod(directory, 0o755)
    env = daemon_env(directory)
    start = await run_cli("serve", "--daemon", cwd=tmp_path, env=env)
    assert start.returncode == 2
    assert f"{directory} is open to other users (mode 755); chmod 700 {directory}" in start.stderr.decode()
    assert not os.path.exists(os.path.join(directory, "daemon.sock"))
    run = await run_cli("run", "--local", "hello", cwd=tmp_path, env=env)  # in-process, with one note
    assert run.returncode == 0
    assert run.stderr.decode().startswith(f"trio-agent: not using the daemon: {directory} is open to other users")
    os.chmod(directory, 0o700)


def test_directory_checks(tmp_path: Path) -> None:
    assert directory_problem(str(tmp_path / "missing")) is None
    (tmp_path / "file").write_text("")
    assert "is not a directory" in (directory_problem(str(tmp_path / "file")) or "")
    (tmp_path / "link").symlink_to(tmp_path)
    assert "is not a directory" in (directory_problem(str(tmp_path / "link")) or "")
    assert daemon_directory({"TRIO_AGENT_DAEMON_DIR": "/x", "XDG_RUNTIME_DIR": "/run/user/7"}) == "/x"
    assert daemon_directory({"XDG_RUNTIME_DIR": "/run/user/7"}) == "/run/user/7/trio-agent"
    assert daemon_directory({}) == f"/tmp/trio-agent-{os.getuid()}"


@pytest.mark.parametrize(("argv", "index"), [
    (["run", "hi"], 1),
    (["run", "--local", "--jsonl", "hi"], 3),
    (["run", "--ephemeral", "hi"], 2),
    (["resume", "--last", "hi"], None),  # in-process
    (["run", "--model", "m", "hi", "--workspace=/w"], 3),
    (["run", "--instructions", "be brief", "--ask-for-approval", "never", "hi"], 5),
    (["run", "--mcp-stdio", "git=uvx git", "--mcp-arg=-x", "hi"], 4),
    (["run"], None),  # argparse says what is missing
    (["run", "a", "b"], None),
    (["run", "--otel", "hi"], None),
    (["run", "--record", "x.jsonl", "hi"], None),
    (["run", "--instructions", "@file.md", "hi"], None),
    (["run", "--ask-for-approval", "on-request", "hi"], None),
    (["run", "--help"], None),
    (["run", "--jso", "hi"], None),  # an abbreviation (refused by the CLI's parser)
    (["run", "--", "-hi"], None),
    (["run", "--model"], None),
    (["run", "-m", "m", "-C", "/w", "--cd=/w", "-s", "read-only", "--json", "-a", "never", "hi"], 11),
    (["run", "-a", "untrusted", "hi"], None),  # a terminal approver
    (["run", "--profile", "generic", "--api-base", "http://127.0.0.1:8000/v1", "hi"], 5),  # LiteLLM, vLLM
    (["run", "--no-store", "--history=full", "hi"], 3),
    (["run", "-"], None),  # the prompt on stdin
    (["run", "--local", "  "], None),  # blank: the CLI's one-line error
    (["serve"], None),
    ([], None),
])
def test_which_runs_the_daemon_takes(argv: list[str], index: int | None) -> None:
    assert prompt_index(argv) == index


# The options of ``run`` that keep it in-process, and why (every other one is served).
IN_PROCESS = {
    "--otel": "its exporters flush at the command's exit, in the client's process",
    "--record": "a cassette file written by the command's own process",
    "--help": "argparse's text", "-h": "argparse's text",
    "-c": "codex's config overrides (not reviewed for the daemon)", "--config": "the same",
}


def test_every_option_of_run_is_served_or_kept_in_process_on_purpose() -> None:
    """The launcher's lists follow run's parser: an option added to ``run`` and left out
    of both sends every run that uses it in-process without a word (``--profile``,
    ``--store``/``--no-store`` and ``--history`` were: a ``--profile generic`` run --
    LiteLLM, vLLM -- was never served warm)."""
    from trio_agent.cli._main import _parsers

    _parser, run, _serve = _parsers()
    options = {option: action.nargs for action in run._actions for option in action.option_strings}
    for option, nargs in options.items():
        if option in IN_PROCESS:
            assert prompt_index(["run", option, "x", "hi"]) is None
            continue
        value = "never" if option in ("-a", "--ask-for-approval") else "x"  # other policies ask on a terminal
        served = ["run", option, "hi"] if nargs == 0 else ["run", option, value, "hi"]
        assert prompt_index(served) == len(served) - 1, f"{option}: neither served nor kept in-process on purpose"


async def test_no_daemon_variable_keeps_the_run_in_process(tmp_path: Path) -> None:
    with running_daemon() as daemon:
        before = await daemon.prime("--local", cwd=tmp_path)
        env = {**daemon.env, "TRIO_AGENT_NO_DAEMON": "1"}
        done = await run_cli("run", "--local", "hello", cwd=tmp_path, env=env)
        assert done.returncode == 0
        assert await daemon.settle() == before  # no spare was taken


async def test_auto_starts_a_daemon_on_first_use(directory: str, tmp_path: Path) -> None:
    env = {**daemon_env(directory), "TRIO_AGENT_DAEMON": "auto"}
    done = await run_cli("run", "--local", "hello", cwd=tmp_path, env=env)
    assert done.returncode == 0 and b"Hello from" in done.stdout
    from trio_agent._daemon._command import daemon_status

    await wait_for_os_fact(lambda: daemon_status(directory) is not None, "the daemon answering")
    status = daemon_status(directory)
    assert status is not None
    stopped = await run_cli("serve", "--stop", cwd=tmp_path, env=env)
    assert stopped.returncode == 0
    await wait_gone([status.pid, *status.workers])


async def test_a_killed_daemon_leaves_no_worker_and_its_socket_falls_back(tmp_path: Path) -> None:
    with running_daemon() as daemon:
        spares = await daemon.prime("--local", cwd=tmp_path)
        os.kill(daemon.pid, signal.SIGKILL)
        await wait_gone([daemon.pid, *spares])  # each worker saw its socket to the daemon close
        run = await run_cli("run", "--local", "hello", cwd=tmp_path, env=daemon.env)  # refused: in-process
        assert run.returncode == 0 and b"Hello from" in run.stdout
        notes = [line for line in run.stderr.decode().splitlines() if line.startswith("trio-agent:")]
        assert notes == ["trio-agent: --local given; using the built-in local scripted model (not a real model)"]
        os.unlink(os.path.join(daemon.directory, "daemon.sock"))  # what the daemon would have removed


async def test_spares_are_bounded_least_recently_used_first(tmp_path: Path) -> None:
    with running_daemon(TRIO_AGENT_DAEMON_SPARES="1") as daemon:
        (first,) = await daemon.prime("--local", cwd=tmp_path)
        (second,) = await daemon.prime("--local", "--jsonl", cwd=tmp_path)  # another configuration
        assert second != first
        await wait_gone([first])  # closed to make room


async def test_an_unused_spare_is_closed_after_the_idle_time(tmp_path: Path) -> None:
    with running_daemon(TRIO_AGENT_DAEMON_IDLE="0.5") as daemon:
        spares = await daemon.prime("--local", cwd=tmp_path)
        await wait_gone(list(spares))
        status = daemon.status()
        assert status is not None and status.workers == ()


def test_the_configuration_key_leaves_out_the_prompt_and_the_terminal_session() -> None:
    from trio_agent._daemon._pool import RunRequest

    def key(argv: list[str], index: int, cwd: str = "/w", **env: str) -> str:
        fields = ["run", cwd, str(index), str(len(argv)), *argv, *(f"{k}={v}" for k, v in env.items())]
        return RunRequest.parse(fields).key()

    base = key(["run", "--local", "hi"], 2, OPENAI_API_KEY="k", PWD="/a")
    assert key(["run", "--local", "another prompt"], 2, OPENAI_API_KEY="k", PWD="/b", TERM="xterm") == base
    assert key(["run", "--local", "hi"], 2, OPENAI_API_KEY="other") != base  # credentials
    assert key(["run", "--local", "hi"], 2, cwd="/elsewhere", OPENAI_API_KEY="k") != base
    assert key(["run", "--jsonl", "hi"], 2, OPENAI_API_KEY="k") != base
    home = Path(tempfile.mkdtemp(prefix="tad-login-"))
    login = key(["run", "hi"], 1, CODEX_HOME=str(home))
    (home / "auth.json").write_text("{}")
    assert key(["run", "hi"], 1, CODEX_HOME=str(home)) != login  # a login written since: a new key
    (home / "auth.json").unlink()
    home.rmdir()
    with pytest.raises(ValueError, match="prompt index"):
        RunRequest.parse(["run", "/w", "5", "2", "run", "hi"])


def test_hostile_requests_on_the_socket_leave_the_daemon_serving(tmp_path: Path) -> None:
    """Garbage, an oversized or lying size, a line that never ends, an unknown operation,
    a run without its standard streams: each connection ends (or is told to fall back)
    and the daemon goes on answering ``status`` with the same pid."""
    import socket

    from trio_agent._daemon._channel import MAX_LINE
    from trio_agent._daemon._server import MAX_REQUEST

    def exchange(path: str, data: bytes, *, keep_open: bool = False) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            # Less than the daemon's REQUEST_BOUND (10 s): a request over a bound must be
            # refused at once, not after the client has been waited for.
            sock.settimeout(5)
            sock.connect(path)
            received = b""
            try:
                sock.sendall(data)
                if not keep_open:
                    sock.shutdown(socket.SHUT_WR)
                while chunk := sock.recv(4096):
                    received += chunk
            except (ConnectionResetError, BrokenPipeError):
                pass  # closed with our bytes unread: closed all the same
            return received

    with running_daemon() as daemon:
        path = os.path.join(daemon.directory, "daemon.sock")
        # Over a bound, with the connection kept open: the daemon closes it at once.
        assert exchange(path, f"{MAX_REQUEST + 1}\n".encode() + b"x" * 16, keep_open=True) == b""
        assert exchange(path, b"x" * (MAX_LINE + 70_000), keep_open=True) == b""  # a line that never ends
        hostile = [
            b"not a size\n",
            b"-5\n",
            b"5\nab",  # ends before its size
            b"7\nunknown",
            b"\xff\xfe\n",
            b"",
        ]
        for data in hostile:
            assert exchange(path, data) == b"", data[:20]
        # A run request that carries no descriptors is told to fall back, not run.
        fields = [str(tmp_path).encode(), b"1", b"2", b"--local", b"hi"]
        run = b"\0".join([b"run", build_identity().encode(), *fields])
        reply = exchange(path, f"{len(run)}\n".encode() + run)
        assert reply.startswith(b"fallback ") and b"standard streams" in reply
        # One from another installation (or without the field) is told the daemon is stale.
        for build in (b"1/other", b"", str(tmp_path).encode()):
            stale = b"\0".join([b"run", build, *fields])
            reply = exchange(path, f"{len(stale)}\n".encode() + stale)
            assert reply == f"fallback stale daemon: started from another installation (pid {daemon.pid})\n".encode()
        status = daemon.status()
        assert status is not None and status.pid == daemon.pid


async def test_a_daemon_of_another_installation_is_not_used_and_serve_daemon_replaces_it(
        directory: str, tmp_path: Path) -> None:
    """An upgrade while a daemon runs: the daemon runs the old code. Simulated with a copy
    of the package (another installation: its files have other inodes). Our client runs
    in-process (same output as without a daemon) with one note, and our ``serve
    --daemon`` stops that daemon and starts one of ours."""
    import shutil

    root = Path(__file__).resolve().parents[2]
    other = tmp_path / "other-install"
    shutil.copytree(root / "trio_agent", other / "trio_agent", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(root / "_trio_agent_launch.py", other / "_trio_agent_launch.py")
    env = daemon_env(directory)
    started = await run_cli("serve", "--daemon", cwd=other, env={**env, "PYTHONPATH": str(other)})
    assert started.returncode == 0, started.stdout + started.stderr
    from trio_agent._daemon._command import daemon_status

    old = daemon_status(directory)
    assert old is not None and old.build and old.build != build_identity()
    seen = {old.pid}
    try:
        run = await run_cli("run", "--local", "hello", cwd=tmp_path, env=env)
        local = await run_cli("run", "--local", "hello", cwd=tmp_path)  # TRIO_AGENT_NO_DAEMON=1
        assert run.returncode == local.returncode == 0
        assert normalised(run.stdout) == normalised(local.stdout)
        assert run.stderr.decode().startswith(
            "trio-agent: not using the daemon: it was started from another installation of trio-agent")
        status = daemon_status(directory)
        assert status is not None and status.pid == old.pid and status.workers == ()  # no spare for us
        replaced = await run_cli("serve", "--daemon", cwd=tmp_path, env=env)
        assert replaced.returncode == 0, replaced.stderr.decode()
        out = replaced.stdout.decode()
        assert f"replacing the daemon started from another installation of trio-agent (pid {old.pid})" in out
        assert "daemon started (pid " in out
        await wait_gone([old.pid])
        new = daemon_status(directory)
        assert new is not None and new.pid != old.pid and new.build == build_identity()
        seen.add(new.pid)
    finally:
        await run_cli("serve", "--stop", cwd=tmp_path, env=env)
        await wait_gone(list(seen))
