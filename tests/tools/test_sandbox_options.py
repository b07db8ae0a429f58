"""What ``bwrap --help`` lists (``--ro-bind-fd``, ``--perms``: the rebuilt ``/run``
uses them only where listed) is asked while the agent opens -- once the sandbox's trial
run (which ``start_probe`` starts) worked, not beside it -- and read at the first
command, so neither the opening nor a command's start waits on a ``bwrap --help``
subprocess (``_bwrap_help``). A fake ``bwrap`` logs how it was run."""

from __future__ import annotations

import gc
import os
import subprocess
import warnings
from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._tools import _bwrap_help, _sandbox, _sandbox_fds


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, fresh in (("_working", set()), ("_probes", {})):
        monkeypatch.setattr(_sandbox, name, fresh)
    monkeypatch.setattr(_bwrap_help, "_started", {})
    monkeypatch.setattr(_sandbox_fds, "_options", {})
    bwrap = tmp_path / "bwrap"
    bwrap.write_text(f"""#!/bin/sh
echo "$1" >> {tmp_path}/log
if [ "$1" = --help ]; then
  echo 'usage: bwrap [OPTIONS...] [--] COMMAND [ARGS...]'
  echo '    --ro-bind-fd FD DEST     Bind open directory or path fd read-only on DEST'
  echo '    --perms OCTAL            Set permissions of next argument'
fi
exit 0
""")
    bwrap.chmod(0o755)
    return bwrap


def runs(fake: Path) -> list[str]:
    log = fake.parent / "log"
    return log.read_text().split() if log.exists() else []


def finished(fake: Path) -> None:
    """Wait for the ``--help`` run the trial started (not waited for by the opening)."""
    started = _bwrap_help._started[os.path.realpath(fake)]
    assert started is not None
    started[0].wait()


def refuse_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a blocking subprocess at a command's start: {args}")

    monkeypatch.setattr(subprocess, "run", refused)


def test_the_options_are_asked_once_the_trial_worked(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = ta.Sandbox(bwrap=str(fake))
    spawned: list[list[str]] = []

    class Recorded(subprocess.Popen[bytes]):
        def __init__(self, argv: list[str], **kwargs: object) -> None:
            spawned.append(argv)
            super().__init__(argv, **kwargs)  # type: ignore[call-overload]

    with monkeypatch.context() as patch:
        patch.setattr(subprocess, "Popen", Recorded)
        _sandbox.start_probe(sandbox)
    # the trial alone: --help is not spawned beside it (on two cores the second spawn
    # waited for the trial's bwrap to set up its namespaces), but once it worked
    assert len(spawned) == 1 and "--help" not in spawned[0]
    resolution = _sandbox.resolve_sandbox(sandbox)
    assert resolution.fallback is None
    finished(fake)
    assert runs(fake).count("--help") == 1
    refuse_runs(monkeypatch)  # from here on, as at a command's start
    assert {"--ro-bind-fd", "--perms"} <= _sandbox_fds.bwrap_options(os.path.realpath(fake))
    assert runs(fake).count("--help") == 1


def test_without_a_probe_the_options_are_asked_at_resolution(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The positive control of the seam: resolve_sandbox alone (no start_probe) runs the
    # trial and --help itself, still before any command.
    resolution = _sandbox.resolve_sandbox(ta.Sandbox(bwrap=str(fake)))
    assert resolution.fallback is None
    finished(fake)
    assert runs(fake).count("--help") == 1
    refuse_runs(monkeypatch)
    assert "--ro-bind-fd" in _sandbox_fds.bwrap_options(os.path.realpath(fake))


def test_a_bwrap_whose_help_lists_nothing_gets_no_new_options(fake: Path) -> None:
    fake.write_text(f"#!/bin/sh\necho \"$1\" >> {fake.parent}/log\nexit 0\n")
    sandbox = ta.Sandbox(bwrap=str(fake))
    _sandbox.start_probe(sandbox)
    _sandbox.resolve_sandbox(sandbox)
    assert _sandbox_fds.bwrap_options(os.path.realpath(fake)) == frozenset()


def test_the_opening_does_not_wait_for_the_help(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # --help blocks until the test opens a FIFO for writing: resolve_sandbox returns all
    # the same (it only started it), and the first command's read gets what it printed.
    fifo = fake.parent / "release"
    os.mkfifo(fifo)
    fake.write_text(f"""#!/bin/sh
echo "$1" >> {fake.parent}/log
if [ "$1" = --help ]; then
  read line < {fifo}
  echo '    --ro-bind-fd FD DEST     Bind open directory or path fd read-only on DEST'
fi
exit 0
""")
    sandbox = ta.Sandbox(bwrap=str(fake))
    _sandbox.start_probe(sandbox)
    assert _sandbox.resolve_sandbox(sandbox).fallback is None
    started = _bwrap_help._started[os.path.realpath(fake)]
    assert started is not None and started[0].poll() is None  # still blocked: not waited for
    with open(fifo, "w") as release:
        release.write("go\n")
    refuse_runs(monkeypatch)
    assert "--ro-bind-fd" in _sandbox_fds.bwrap_options(os.path.realpath(fake))
    assert _bwrap_help._started[os.path.realpath(fake)] is None  # read once, its memory file closed


def test_a_help_never_read_is_reaped_quietly(fake: Path) -> None:
    # an agent that never ran a command leaves the run (exited) to the process's end
    _sandbox.resolve_sandbox(ta.Sandbox(bwrap=str(fake)))
    started = _bwrap_help._started.pop(os.path.realpath(fake))
    assert started is not None
    run, out = started
    os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    os.close(out)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        del run, started
        gc.collect()
    assert [w for w in said if issubclass(w.category, ResourceWarning)] == []
