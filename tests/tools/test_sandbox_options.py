"""What ``bwrap --help`` lists (``--ro-bind-fd``, ``--perms``: the rebuilt ``/run``
uses them only where listed) is learnt while the agent opens -- beside the sandbox's
trial run that ``start_probe`` starts -- so no command's start blocks the event loop on
a ``bwrap --help`` subprocess. A fake ``bwrap`` logs how it was run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._tools import _sandbox, _sandbox_fds


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, fresh in (("_working", set()), ("_probes", {}), ("_helps", {})):
        monkeypatch.setattr(_sandbox, name, fresh)
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


def refuse_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a blocking subprocess at a command's start: {args}")

    monkeypatch.setattr(subprocess, "run", refused)


def test_the_probe_learns_the_options_before_any_command(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = ta.Sandbox(bwrap=str(fake))
    _sandbox.start_probe(sandbox)
    resolution = _sandbox.resolve_sandbox(sandbox)
    assert resolution.fallback is None
    assert runs(fake).count("--help") == 1
    refuse_runs(monkeypatch)  # from here on, as at a command's start
    assert {"--ro-bind-fd", "--perms"} <= _sandbox_fds.bwrap_options(os.path.realpath(fake))
    assert runs(fake).count("--help") == 1


def test_without_a_probe_the_options_are_learnt_at_resolution(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The positive control of the seam: resolve_sandbox alone (no start_probe) runs the
    # trial and --help itself, still before any command.
    resolution = _sandbox.resolve_sandbox(ta.Sandbox(bwrap=str(fake)))
    assert resolution.fallback is None
    assert runs(fake).count("--help") == 1
    refuse_runs(monkeypatch)
    assert "--ro-bind-fd" in _sandbox_fds.bwrap_options(os.path.realpath(fake))


def test_a_bwrap_whose_help_lists_nothing_gets_no_new_options(fake: Path) -> None:
    fake.write_text(f"#!/bin/sh\necho \"$1\" >> {fake.parent}/log\nexit 0\n")
    sandbox = ta.Sandbox(bwrap=str(fake))
    _sandbox.start_probe(sandbox)
    _sandbox.resolve_sandbox(sandbox)
    assert _sandbox_fds.bwrap_options(os.path.realpath(fake)) == frozenset()
