"""The helpers' process-tree functions (``_reaping``), run in-process on a throwaway tree of real
processes (the helper itself is exercised end to end by the exec_command tests)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

from trio_agent._tools import _reaping

from .._os_facts import wait_for_os_fact, wait_gone


@attrs.frozen
class Tree:
    root: trio.Process
    subshell: int
    grandchild: int


def _publish(path: Path) -> str:
    return f"echo $! > {path}.tmp && mv {path}.tmp {path}"


def _comms(pids: list[int]) -> list[str]:
    names = []
    for pid in pids:
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except (FileNotFoundError, ProcessLookupError):
            names.append("<gone>")
    return names


@pytest.fixture
async def tree(tmp_path: Path) -> AsyncIterator[Tree]:
    """``sh`` with a ``sleep`` child and a subshell child that has a ``sleep`` child. None
    of them exits unless signalled (the subshell sleeps too instead of waiting)."""
    sub, grand = tmp_path / "sub", tmp_path / "grand"
    script = f"sleep 300 & (sleep 300 & {_publish(grand)}; exec sleep 300) & {_publish(sub)}; wait"
    root = await trio.lowlevel.open_process(["/bin/sh", "-c", script])
    try:
        await wait_for_os_fact(lambda: sub.exists() and grand.exists(), "the tree's pid files")
        # The `mv` that published a pid file may not have exited yet: wait until only the
        # three sleeps are left under the root (the subshell has exec'd into its sleep).
        await wait_for_os_fact(lambda: _comms(_reaping.descendants(root.pid)) == ["sleep"] * 3, "a settled tree")
        yield Tree(root, int(sub.read_text()), int(grand.read_text()))
    finally:
        # Not a subreaper: kill the descendants while the root still holds them together.
        leftovers = _reaping.descendants(root.pid)
        _reaping.signal_descendants(root.pid, (signal.SIGKILL,))
        root.kill()
        await root.wait()
        await wait_gone(leftovers)


async def test_descendants_lists_the_whole_subtree(tree: Tree) -> None:
    found = _reaping.descendants(tree.root.pid)
    assert {tree.subshell, tree.grandchild} <= set(found)
    assert len(found) == 3  # and the root's own sleep
    assert found.index(tree.subshell) < found.index(tree.grandchild)  # parents first
    assert tree.root.pid not in found


@pytest.mark.parametrize("pidfds", [True, False])
async def test_signal_descendants_reaches_every_level(
    tree: Tree, monkeypatch: pytest.MonkeyPatch, pidfds: bool
) -> None:
    assert _reaping._pidfds_work(), "pidfd_open is unavailable on this kernel"
    monkeypatch.setattr(_reaping, "_PIDFDS", pidfds)
    found = _reaping.descendants(tree.root.pid)
    assert _reaping.signal_descendants(tree.root.pid, (signal.SIGKILL,)) == 3
    await wait_gone(found)
    with trio.fail_after(5):
        assert await tree.root.wait() == 0  # its children died, so its `wait` returned


async def test_signal_descendants_skips_the_given_subtrees(tree: Tree) -> None:
    # Only the root's own sleep is outside the skipped subshell's subtree.
    assert _reaping.signal_descendants(tree.root.pid, (signal.SIGCONT,), skip=frozenset({tree.subshell})) == 1
