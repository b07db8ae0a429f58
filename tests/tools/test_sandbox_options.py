"""What ``bwrap --help`` lists (``--ro-bind-fd``, ``--perms``: the rebuilt ``/run``
uses them only where listed) is learnt by the sandbox's trial run -- whose no-op is
``bwrap --help`` itself, inside the sandbox -- so neither a second process beside the
trial nor a command's start runs it (``_bwrap_help``). A fake ``bwrap`` logs how it
was run, and runs the command after ``--`` as the real one would."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._tools import _bwrap_help, _sandbox, _sandbox_fds

HELP = """
  echo 'usage: bwrap [OPTIONS...] [--] COMMAND [ARGS...]'
  echo '    --ro-bind-fd FD DEST     Bind open directory or path fd read-only on DEST'
  echo '    --perms OCTAL            Set permissions of next argument'
"""


def fake_bwrap(path: Path, help_lines: str = HELP) -> None:
    path.write_text(f"""#!/bin/sh
echo "$1" >> {path.parent}/log
if [ "$1" = --help ]; then
{help_lines}
  exit 0
fi
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do shift; done
shift
exec "$@"
""")
    path.chmod(0o755)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, fresh in (("_working", set()), ("_probes", {})):
        monkeypatch.setattr(_sandbox, name, fresh)
    monkeypatch.setattr(_bwrap_help, "_printed", {})
    monkeypatch.setattr(_sandbox_fds, "_options", {})
    bwrap = tmp_path / "bwrap"
    fake_bwrap(bwrap)
    return bwrap


def runs(fake: Path) -> list[str]:
    log = fake.parent / "log"
    return log.read_text().split() if log.exists() else []


def refuse_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a blocking subprocess at a command's start: {args}")

    monkeypatch.setattr(subprocess, "run", refused)


def test_the_trial_learns_the_options_in_one_process(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = ta.Sandbox(bwrap=str(fake))
    spawned: list[list[str]] = []

    class Recorded(subprocess.Popen[bytes]):
        def __init__(self, argv: list[str], **kwargs: object) -> None:
            spawned.append(argv)
            super().__init__(argv, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    _sandbox.start_probe(sandbox)
    resolution = _sandbox.resolve_sandbox(sandbox)
    assert resolution.fallback is None
    # one process, the trial, whose no-op is bwrap's --help inside the sandbox
    assert len(spawned) == 1 and spawned[0][-2:] == [os.path.realpath(fake), "--help"]
    assert runs(fake).count("--help") == 1
    refuse_runs(monkeypatch)  # from here on, as at a command's start
    assert {"--ro-bind-fd", "--perms"} <= _sandbox_fds.bwrap_options(os.path.realpath(fake))
    assert runs(fake).count("--help") == 1


def test_without_a_probe_the_trial_at_resolution_learns_them(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The positive control of the seam: resolve_sandbox alone (no start_probe) runs the
    # trial itself, still before any command.
    resolution = _sandbox.resolve_sandbox(ta.Sandbox(bwrap=str(fake)))
    assert resolution.fallback is None
    assert runs(fake).count("--help") == 1
    refuse_runs(monkeypatch)
    assert "--ro-bind-fd" in _sandbox_fds.bwrap_options(os.path.realpath(fake))


def test_a_bwrap_whose_help_lists_nothing_gets_no_new_options(fake: Path) -> None:
    fake_bwrap(fake, help_lines="  :")
    sandbox = ta.Sandbox(bwrap=str(fake))
    _sandbox.start_probe(sandbox)
    _sandbox.resolve_sandbox(sandbox)
    assert _sandbox_fds.bwrap_options(os.path.realpath(fake)) == frozenset()


def test_without_a_trial_that_worked_a_command_asks_itself(fake: Path) -> None:
    # a trial that failed notes nothing; bwrap_options then runs --help (as before)
    assert _bwrap_help.printed(os.path.realpath(fake)) is None
    assert "--perms" in _sandbox_fds.bwrap_options(os.path.realpath(fake))
    assert runs(fake) == ["--help"]
