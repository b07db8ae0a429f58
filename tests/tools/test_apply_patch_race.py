"""apply_patch against a tree that changes under it (issue 21, hole 4).

A command of the model's may swap a directory of the workspace for a symlink to the
outside while a patch applies. Nothing may then land outside (no file, no temp file):
each patch either applies inside the workspace or fails with an error.

The deterministic tests swap at the exact point between planning (paths resolved and
checked) and committing (files written) by stepping in at ``apply_patch._commit``, which
exists on the unfixed code too (there, the write follows the swapped link: they fail on
it). The concurrent test runs a real swapper process flat out against patches of a few
hundred files; its positive control applies the same patch undisturbed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from trio_agent._tools import _patch_commit as patch_commit
from trio_agent._tools import apply_patch as apply_patch_module
from trio_agent._tools.apply_patch import PatchError, apply_patch_to_workspace


def wrap(*body: str) -> str:
    return "\n".join(("*** Begin Patch", *body, "*** End Patch")) + "\n"


def adds(prefix: str, count: int) -> str:
    return wrap(*(line for i in range(count) for line in (f"*** Add File: {prefix}{i}.txt", f"+x{i}")))


def everything(root: Path) -> list[str]:
    """Every entry beneath ``root``, without following symlinks."""
    found = []
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            found.append(os.path.relpath(os.path.join(parent, name), root))
    return sorted(found)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


def swap_out(ws: Path, out: Path, name: str = "d") -> None:
    """Park ``ws/name`` (if it is there) and put a symlink to ``out`` in its place."""
    if (ws / name).exists():
        (ws / name).rename(ws / f"{name}.parked")
    (ws / name).symlink_to(out)


def before_commit(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    """Run ``action`` after the patch is planned, just before it is committed."""
    real_commit = apply_patch_module._commit

    def commit(*args: object, **kwargs: object) -> None:
        action()
        real_commit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(apply_patch_module, "_commit", commit)


# -- the swap injected between planning and committing -------------------------------------


def test_adds_into_a_directory_swapped_after_planning_fail_and_land_nowhere(
    ws: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "d").mkdir()
    before_commit(monkeypatch, lambda: swap_out(ws, out))
    with pytest.raises(PatchError, match=r"d changed while it was in use: it is now a symlink\. No files were changed"):
        apply_patch_to_workspace(adds("d/f", 3), ws)
    assert everything(out) == []
    assert everything(ws) == ["d", "d.parked"]  # no temp file left behind
    # Positive control: the same patch, undisturbed, lands in d.
    monkeypatch.undo()
    (ws / "d").unlink()
    (ws / "d.parked").rename(ws / "d")
    apply_patch_to_workspace(adds("d/f", 3), ws)
    assert everything(ws) == ["d", "d/f0.txt", "d/f1.txt", "d/f2.txt"]


def test_a_directory_to_be_made_that_appears_as_a_link_out_fails(
    ws: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before_commit(monkeypatch, lambda: swap_out(ws, out))
    with pytest.raises(PatchError, match="d changed while it was in use: it is now a symlink"):
        apply_patch_to_workspace(adds("d/sub/f", 2), ws)
    assert everything(out) == []
    assert everything(ws) == ["d"]


def test_an_update_through_a_swapped_directory_fails(ws: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("old\n")
    (out / "f.txt").write_text("old\n")
    before_commit(monkeypatch, lambda: swap_out(ws, out))
    with pytest.raises(PatchError, match="No files were changed"):
        apply_patch_to_workspace(wrap("*** Update File: d/f.txt", "-old", "+new"), ws)
    assert (out / "f.txt").read_text() == "old\n" and everything(out) == ["f.txt"]
    assert (ws / "d.parked" / "f.txt").read_text() == "old\n"


def test_a_delete_through_a_swapped_directory_fails(ws: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("mine\n")
    (out / "f.txt").write_text("theirs\n")
    before_commit(monkeypatch, lambda: swap_out(ws, out))
    with pytest.raises(PatchError, match="No files were changed"):
        apply_patch_to_workspace(wrap("*** Delete File: d/f.txt"), ws)
    assert everything(out) == ["f.txt"]
    assert everything(ws) == ["d", "d.parked", "d.parked/f.txt"]


def test_a_move_into_a_swapped_directory_fails(ws: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "a.txt").write_text("x\n")
    (ws / "e").mkdir()
    before_commit(monkeypatch, lambda: swap_out(ws, out, "e"))
    with pytest.raises(PatchError, match="e changed while it was in use"):
        apply_patch_to_workspace(wrap("*** Update File: a.txt", "*** Move to: e/b.txt", "-x", "+y"), ws)
    assert everything(out) == []
    assert (ws / "a.txt").read_text() == "x\n"


def test_a_swap_after_staging_keeps_every_file_inside(ws: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swapped once the first file is staged: the directory is held open, so the rest is
    staged and renamed in it (parked, inside), never through the new link."""
    (ws / "d").mkdir()
    real_stage = patch_commit._stage
    calls: list[str] = []

    def stage(directory: int, name: str, data: bytes, mode: int | None) -> str:
        calls.append(name)
        if len(calls) == 2:
            swap_out(ws, out)
        return real_stage(directory, name, data, mode)

    monkeypatch.setattr(patch_commit, "_stage", stage)
    apply_patch_to_workspace(adds("d/f", 3), ws)
    assert everything(out) == []
    assert everything(ws) == ["d", "d.parked", "d.parked/f0.txt", "d.parked/f1.txt", "d.parked/f2.txt"]


# -- a real concurrent swapper -------------------------------------------------------------

# The swapper waits until a patch writes into d (its commit has begun: a temp file or a
# file appears), then flips d flat out, BURST times, and leaves it a directory again for the
# next patch. Flat out all the time, nearly every plan would meet the link and be refused
# before committing, and the commit -- where the unfixed code follows the link -- would
# never be raced; bursts overlap the next plan too.
SWAPPER = r"""
import os, stat, sys, time
ws, out, stop, burst = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
os.chdir(ws)
flips = parked = 0
deadline = time.monotonic() + 120  # it stops by itself if the test is gone

def written():
    try:
        return bool(os.listdir("d"))
    except OSError:
        return True

def flip():
    global flips, parked
    try:
        if stat.S_ISDIR(os.lstat("d").st_mode):
            os.rename("d", f"d.parked{parked}")
            parked += 1
            os.symlink(out, "d")
            flips += 1
        else:
            os.unlink("d")
    except FileNotFoundError:
        pass
    except OSError:
        pass  # the patch made d meanwhile, or the like: go on flipping
    try:
        if not os.path.lexists("d"):
            os.mkdir("d")
    except OSError:
        pass

print("ready", flush=True)
while not os.path.exists(stop) and time.monotonic() < deadline:
    if written():
        for _ in range(burst):
            flip()
        while os.path.lexists("d") and not stat.S_ISDIR(os.lstat("d").st_mode):
            flip()  # leave d a directory
print(flips, flush=True)
"""
BURST = 400
FILES = 300
ROUNDS = 6


@pytest.fixture
def swapper(ws: Path, out: Path, tmp_path: Path) -> Iterator[Callable[[], int]]:
    """A process flipping ``ws/d`` between a directory and a symlink to ``out`` as fast
    as it can; calling the fixture's value stops it and returns how often it flipped."""
    (ws / "d").mkdir()
    stop = tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, "-c", SWAPPER, str(ws), str(out), str(stop), str(BURST)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"

    def finish() -> int:
        stop.touch()
        output, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        return int(output)

    try:
        yield finish
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def landed(ws: Path, prefix: str) -> list[str]:
    return [entry for entry in everything(ws) if os.path.basename(entry).startswith(prefix)]


def test_a_concurrent_swapper_never_gets_a_file_outside(ws: Path, out: Path, swapper: Callable[[], int]) -> None:
    outcomes = []
    for round_ in range(ROUNDS):
        try:
            apply_patch_to_workspace(adds(f"d/r{round_}_f", FILES), ws)
            outcomes.append("applied")
        except PatchError as exc:
            outcomes.append(f"failed: {exc}")
        assert everything(out) == [], f"round {round_}: written outside the workspace"
    flips = swapper()
    assert flips > ROUNDS  # it really swapped, many times
    assert [entry for entry in everything(ws) if entry.endswith(".apply_patch.tmp")] == []
    for round_, outcome in enumerate(outcomes):
        clear = ("applied", "outside the workspace", "changed while it was in use")
        assert any(word in outcome for word in clear), (round_, outcome)
        names = landed(ws, f"r{round_}_f")
        # All of a patch inside (in d, or in a directory parked while it applied), or none.
        assert len(names) == (FILES if outcome == "applied" else 0), (round_, outcome, names[:5])


def test_without_the_swapper_every_file_lands_in_place(ws: Path) -> None:
    """Positive control of the concurrent test: the same patch, undisturbed."""
    (ws / "d").mkdir()
    apply_patch_to_workspace(adds("d/r0_f", FILES), ws)
    assert landed(ws, "r0_f") == sorted(f"d/r0_f{i}.txt" for i in range(FILES))
