"""Files a sandboxed command makes to take the agent's memory: ``truncate -s 1T x`` is
a regular file of a terabyte that costs nothing on disk, and a reader outside the
sandbox that reads it whole takes the agent -- and under ``serve``, every client's
thread -- down with it (a ``MemoryError`` at best, the OOM killer at worst).

``apply_patch`` plans in memory: it reads at most ``MAX_FILE_BYTES`` of a file it
updates, moves or deletes, and refuses a bigger one with a failed result that says
what to do; the workspace's ``.git`` file (read to find the git dir it points to) is
read up to 64 KiB, by ``apply_patch`` and by the sandbox that each command's ``bwrap``
line protects it with (in a workspace without git, a command may have made ``.git``).
Positive controls: the same patches on files of sound size apply; a sound ``.git``
file's git dir is protected.

Each case runs with the address space capped (``_memory``), so a reader that reads
the whole file fails at once instead of trying.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trio_agent._tools._sandbox import protected_paths
from trio_agent._tools.apply_patch import MAX_FILE_BYTES, PatchError, apply_patch_to_workspace

from ._memory import address_space_capped

TERABYTE = 1 << 40


def sparse(path: Path, size: int) -> Path:
    with path.open("wb") as file:
        file.truncate(size)
    return path


def patch(*lines: str) -> str:
    return "\n".join(("*** Begin Patch", *lines, "*** End Patch"))


UPDATE = patch("*** Update File: x.txt", "@@", "-old", "+new")
MOVE = patch("*** Update File: x.txt", "*** Move to: y.txt", "@@", "-old", "+new")
DELETE = patch("*** Delete File: x.txt")


@pytest.mark.parametrize("text", [UPDATE, MOVE, DELETE], ids=["update", "move", "delete"])
def test_a_huge_sparse_file_is_refused_unread_and_left_alone(tmp_path: Path, text: str) -> None:
    target = sparse(tmp_path / "x.txt", TERABYTE)
    with address_space_capped(), pytest.raises(PatchError) as refused:
        apply_patch_to_workspace(text, tmp_path)
    message = str(refused.value)
    assert f"{TERABYTE} bytes" in message and f"at most {MAX_FILE_BYTES >> 20} MiB" in message
    assert "with a command instead" in message and "No file was changed" in message
    assert target.stat().st_size == TERABYTE and not (tmp_path / "y.txt").exists()


@pytest.mark.parametrize("text", [UPDATE, MOVE, DELETE], ids=["update", "move", "delete"])
def test_the_same_patch_applies_to_a_file_of_sound_size(tmp_path: Path, text: str) -> None:
    (tmp_path / "x.txt").write_text("old\n")
    with address_space_capped():
        apply_patch_to_workspace(text, tmp_path)
    if text is DELETE:
        assert not (tmp_path / "x.txt").exists()
    else:
        assert (tmp_path / ("y.txt" if text is MOVE else "x.txt")).read_text() == "new\n"


def test_a_file_just_at_the_limit_is_read(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_bytes(b"old\n" + b"." * (MAX_FILE_BYTES - 5) + b"\n")
    assert os.path.getsize(tmp_path / "x.txt") == MAX_FILE_BYTES
    with address_space_capped():
        apply_patch_to_workspace(UPDATE, tmp_path)
    assert (tmp_path / "x.txt").read_bytes().startswith(b"new\n")


def test_a_huge_sparse_dot_git_file_is_not_read_whole(tmp_path: Path) -> None:
    """The workspace's ``.git`` as a file (a worktree's pointer) is read to protect the
    git dir it names; a terabyte one is no pointer and is not read: the patch applies."""
    sparse(tmp_path / ".git", TERABYTE)
    (tmp_path / "x.txt").write_text("old\n")
    with address_space_capped():
        apply_patch_to_workspace(UPDATE, tmp_path, protect_git=True)
    assert (tmp_path / "x.txt").read_text() == "new\n"


def test_the_sandbox_does_not_read_a_huge_sparse_dot_git_file_whole(tmp_path: Path) -> None:
    sparse(tmp_path / ".git", TERABYTE)
    with address_space_capped():
        assert protected_paths([tmp_path]) == [tmp_path / ".git"]


def test_the_sandbox_still_protects_the_git_dir_a_sound_dot_git_file_names(tmp_path: Path) -> None:
    (tmp_path / "gitdir").mkdir()
    (tmp_path / ".git").write_text("gitdir: gitdir\n")
    with address_space_capped():
        assert protected_paths([tmp_path]) == [tmp_path / ".git", tmp_path / "gitdir"]
