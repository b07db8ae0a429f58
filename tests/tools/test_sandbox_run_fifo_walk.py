"""Named pipes and private files in the rebuilt ``/run``'s flags (sec8's review; the
behaviour under real ``bwrap`` is in ``tests/acceptance/test_sandbox_run_fifos.py`` and
``test_sandbox_run_private_files.py``).

A FIFO is masked as a socket is (a way to whoever reads it), and makes its directory
one to rebuild; none blocks the walk or the rebuild (nothing is opened for reading
but a regular file, and that without waiting), not even one swapped in for a pid file
after the walk. As root, another user's file that a command could not read is bound
as it is (its owner and mode kept), not copied (the copy would be the sandbox's user's).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trio_agent._tools import _sandbox_run

from .test_sandbox_run import close_descriptors, closing, described, root, run_flags, triples

__all__ = ["close_descriptors", "root"]  # fixtures, used by name

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="another user's directory needs root (CI runs as root)")


def test_a_fifo_is_masked_and_its_directory_rebuilt(root: Path) -> None:
    # No reader anywhere: a walk or a rebuild that opened one to read would block here.
    os.mkfifo(root / "initctl")
    os.mkfifo(root / "quiet" / "pipe")
    with closing(run_flags([str(root / "user")], [], str(root))) as flags:
        masks = triples(flags.rebuild)
        assert ("--ro-bind", "/dev/null", f"{root}/initctl") in masks  # sec7: --ro-bind-try, the pipe itself
        assert ("--ro-bind", "/dev/null", f"{root}/quiet/pipe") in masks
        assert ("--dir", f"{root}/quiet") in {tuple(flags.rebuild[i:i + 2]) for i in range(len(flags.rebuild))}
        # The positive control: the socket beside is masked as before, the pid file copied.
        assert ("--ro-bind", "/dev/null", f"{root}/svc/sock") in masks
        assert described(flags, "--file", f"{root}/svc/svc.pid") == b"1\n"


@ROOT_ONLY
def test_another_users_fifo_and_one_swapped_in_after_the_walk(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = root / "other"
    other.mkdir()
    os.mkfifo(other / "control")
    for name in ("swapped.pid", "kept.pid"):
        (other / name).write_text("1\n")
    os.chown(other, 4242, 4242)
    walk = _sandbox_run._Walk.run

    def walk_then_swap(self: object, top: str) -> object:
        listing = walk(self, top)  # type: ignore[arg-type]
        (other / "swapped.pid").unlink()
        os.mkfifo(other / "swapped.pid")  # no reader: opening it to read would block
        return listing

    monkeypatch.setattr(_sandbox_run._Walk, "run", walk_then_swap)
    with closing(run_flags([str(root / "user")], [], str(root))) as flags:
        assert ("--ro-bind", "/dev/null", f"{other}/control") in triples(flags.rebuild)  # sec7: --ro-bind-fd
        assert f"{other}/swapped.pid" not in flags.rebuild  # not what the walk listed: left out
        assert described(flags, "--file", f"{other}/kept.pid") == b"1\n"  # the positive control


@ROOT_ONLY
def test_a_file_a_command_could_not_read_is_bound_not_copied(root: Path) -> None:
    other = root / "other"
    other.mkdir()
    os.mkfifo(other / "control")  # a directory to rebuild
    for name, mode in (("private", 0o600), ("group", 0o640), ("public", 0o644)):
        (other / name).write_text(f"{name}\n")
        os.chmod(other / name, mode)
        os.chown(other / name, 4242, 4242)
    (root / "svc" / "private").write_text("private\n")
    os.chmod(root / "svc" / "private", 0o600)
    os.chown(root / "svc" / "private", 4242, 4242)
    (root / "svc" / "own").write_text("own\n")
    os.chmod(root / "svc" / "own", 0o600)  # root's own: uid 0 reads it without capabilities
    os.chown(other, 4242, 4242)
    with closing(run_flags([str(root / "user")], [], str(root))) as flags:
        # sec7: each one copied (root read it; the copy is root's, readable in the sandbox).
        for name in ("private", "group"):
            assert isinstance(described(flags, "--ro-bind-fd", f"{other}/{name}"), int), name
        assert ("--ro-bind-try", f"{root}/svc/private", f"{root}/svc/private") in triples(flags.rebuild)
        # The positive controls: what a command may read is copied.
        assert described(flags, "--file", f"{other}/public") == b"public\n"
        assert described(flags, "--file", f"{root}/svc/own") == b"own\n"
