"""``_beneath``: lookups beneath a root that never let the kernel follow a symlink.

Resolution follows in-tree symlinks (relative and absolute) and refuses escaping ones,
naming the link; use (``open_dir``) follows nothing, so a component swapped for a
symlink between the two fails instead of leading outside."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from trio_agent._tools._beneath import MAX_LINKS, Beneath, Changed, Escape, TooManyLinks

from .._fds import held, opened_since


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """ws/ with a real dir, in-tree links (relative, absolute, to the root), links out, a
    loop, a dangling link and a file; out/ beside it."""
    ws, out = tmp_path / "ws", tmp_path / "out"
    (ws / "real" / "sub").mkdir(parents=True)
    out.mkdir()
    (ws / "real" / "f").write_text("in\n")
    (ws / "file").write_text("x\n")
    (out / "f").write_text("secret\n")
    links = {
        "lnk": "real", "abs": str(ws / "real"), "self": ".", "real/up": "..", "real/esc": "../../out",
        "absout": str(out), "loop": "loop", "dangling": "nowhere", "tofile": "real/f",
    }
    for name, target in links.items():
        (ws / name).symlink_to(target)
    return ws


@pytest.fixture
def fs(tree: Path) -> Iterator[Beneath]:
    with Beneath(tree) as beneath:
        yield beneath


@pytest.mark.parametrize(
    ("path", "follow", "parts"),
    [
        ("real/f", True, ("real", "f")),
        ("lnk/f", True, ("real", "f")),
        ("abs/f", True, ("real", "f")),  # an absolute link that stays inside is followed
        ("self/self/lnk/sub", True, ("real", "sub")),
        ("real/up/real/f", True, ("real", "f")),
        ("lnk/sub/../f", True, ("real", "f")),  # '..' after a link: the link target's parent
        ("tofile", True, ("real", "f")),
        ("tofile", False, ("tofile",)),  # the entry itself, for unlinking
        ("lnk", False, ("lnk",)),
        ("lnk/sub", False, ("real", "sub")),  # only the final component is kept
        ("dangling", True, ("nowhere",)),  # a dangling link names what it would create
        ("new/a/b", True, ("new", "a", "b")),  # missing components are kept as given
        ("file/x/y", True, ("file", "x", "y")),  # below a file: as given (callers see the file)
        ("missing/../real/f", True, ("real", "f")),
        (".", True, ()),
    ],
)
def test_resolve_follows_links_that_stay_inside(fs: Beneath, path: str, follow: bool, parts: tuple[str, ...]) -> None:
    assert fs.resolve(path, follow_final=follow) == parts


@pytest.mark.parametrize(
    ("path", "link", "target"),
    [
        ("../x", None, None),
        ("real/../../x", None, None),
        ("real/esc/f", "real/esc", "../../out"),
        ("lnk/esc", "real/esc", "../../out"),  # the link's canonical path is named
        ("absout/f", "absout", "<out>"),
        ("real/up/..", "real/up", ".."),
        ("/etc/passwd", None, "/etc/passwd"),
    ],
)
def test_resolve_refuses_escapes_naming_the_link(
    fs: Beneath, tree: Path, path: str, link: str | None, target: str | None
) -> None:
    with pytest.raises(Escape) as info:
        fs.resolve(path)
    assert info.value.link == link
    assert info.value.target == (str(tree.parent / "out") if target == "<out>" else target)


def test_an_escaping_final_link_is_refused_even_when_not_followed_above_it(fs: Beneath) -> None:
    # A dangling escape: the kernel would create the file outside; we refuse.
    os.symlink("../../elsewhere", os.path.join(fs.real, "real", "out_dangling"))
    with pytest.raises(Escape, match=r"real/out_dangling -> \.\./\.\./elsewhere"):
        fs.resolve("real/out_dangling")
    assert fs.resolve("real/out_dangling", follow_final=False) == ("real", "out_dangling")


def test_links_are_bounded(fs: Beneath, tree: Path) -> None:
    with pytest.raises(TooManyLinks, match="loop"):
        fs.resolve("loop/x")
    previous = "real"
    for i in range(MAX_LINKS):  # a chain of exactly MAX_LINKS links resolves...
        (tree / f"c{i}").symlink_to(previous)
        previous = f"c{i}"
    assert fs.resolve(f"{previous}/f") == ("real", "f")
    (tree / "one_more").symlink_to(previous)  # ...one more does not
    with pytest.raises(TooManyLinks):
        fs.resolve("one_more/f")


def test_open_dir_follows_nothing(fs: Beneath, tree: Path) -> None:
    fd = fs.open_dir(("real", "sub"))
    os.close(fd)
    with pytest.raises(Changed, match="lnk changed while it was in use: it is now a symlink"):
        fs.open_dir(("lnk",))
    with pytest.raises(Changed, match="it is now not a directory"):
        fs.open_dir(("file", "x"), create=True)
    with pytest.raises(FileNotFoundError):
        fs.open_dir(("new",))
    made: list[tuple[str, ...]] = []
    os.close(fs.open_dir(("new", "a"), create=True, made=made))
    assert made == [("new",), ("new", "a")] and (tree / "new" / "a").is_dir()


def test_lstat_and_read_do_not_follow(fs: Beneath) -> None:
    assert fs.lstat(("lnk", "f")) is None  # 'lnk' is a symlink: not walked through
    status = fs.lstat(("tofile",))
    assert status is not None and stat.S_ISLNK(status.st_mode)
    assert fs.read_bytes(("real", "f"), limit=64)[0] == b"in\n"
    with pytest.raises(OSError):
        fs.read_bytes(("tofile",), limit=64)  # O_NOFOLLOW: ELOOP
    with pytest.raises(IsADirectoryError):
        fs.read_bytes(("real",), limit=64)


def test_a_swap_between_resolving_and_using_fails_instead_of_escaping(fs: Beneath, tree: Path) -> None:
    """The deterministic race: resolve, swap a directory for a link out, then use."""
    (tree / "d").mkdir()
    parts = fs.resolve("d/new.txt")
    (tree / "d").rename(tree / "d.parked")
    (tree / "d").symlink_to(tree.parent / "out")
    with pytest.raises(Changed, match="d changed while it was in use: it is now a symlink"):
        fs.open_dir(parts[:-1], create=True)
    assert sorted(os.listdir(tree.parent / "out")) == ["f"]


def test_a_directory_held_open_keeps_its_writes_inside(fs: Beneath, tree: Path) -> None:
    """A swap after the directory was opened: the write lands in the directory that was
    opened (renamed, still inside), not where the new link points."""
    (tree / "d").mkdir()
    fd = fs.open_dir(("d",))
    try:
        (tree / "d").rename(tree / "d.parked")
        (tree / "d").symlink_to(tree.parent / "out")
        os.close(os.open("x", os.O_WRONLY | os.O_CREAT | os.O_EXCL, dir_fd=fd))
    finally:
        os.close(fd)
    assert (tree / "d.parked" / "x").exists()
    assert sorted(os.listdir(tree.parent / "out")) == ["f"]


def test_a_swap_in_the_middle_of_a_walk_stays_beneath(
    fs: Beneath, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory swapped for a link out just after the walk opened it: the walk goes on
    in the directory it holds, and using the answer then fails."""
    (tree / "a" / "b").mkdir(parents=True)
    real_open = os.open

    def swapping_open(path: str, flags: int, *args: object, **kwargs: object) -> int:
        fd = real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]
        if path == "a":
            (tree / "a").rename(tree / "a.parked")
            (tree / "a").symlink_to(tree.parent / "out")
        return fd

    monkeypatch.setattr(os, "open", swapping_open)
    parts = fs.resolve("a/b/new.txt")
    monkeypatch.undo()
    assert parts == ("a", "b", "new.txt")
    with pytest.raises(Changed):
        fs.open_dir(parts[:-1], create=True)
    assert sorted(os.listdir(tree.parent / "out")) == ["f"]


def test_no_descriptor_is_left_open(tree: Path) -> None:
    before = held()
    with Beneath(tree) as fs:
        for path in ("real/f", "lnk/sub", "new/a", "self/lnk/f"):
            fs.resolve(path)
        for bad in ("real/esc/f", "loop/x", "../x"):
            with pytest.raises((Escape, TooManyLinks)):
                fs.resolve(bad)
        with pytest.raises(Changed):
            fs.open_dir(("lnk",))
        fs.lstat(("real", "f"))
        fs.read_bytes(("real", "f"), limit=64)
    assert opened_since(before) == {}


UNPRIVILEGED_CHILD = r"""
import json, sys
from pathlib import Path
from trio_agent._tools.apply_patch import PatchError, apply_patch_to_workspace
ws = Path(sys.argv[1])
patch = "*** Begin Patch\n*** Add File: locked/sub/new.txt\n+hi\n*** Update File: lnk/f.txt\n-a\n+b\n*** End Patch\n"
result = {"uid": __import__("os").geteuid(), "applied": apply_patch_to_workspace(patch, ws)}
try:
    apply_patch_to_workspace("*** Begin Patch\n*** Add File: out/x.txt\n+x\n*** End Patch\n", ws)
    result["escape"] = "applied"
except PatchError as exc:
    result["escape"] = str(exc)
print(json.dumps(result))
"""


def test_an_unprivileged_user_walks_searchable_directories_it_cannot_list(tmp_path: Path) -> None:
    """Not root, a directory with search but no read permission is still walked (O_PATH
    descriptors need none), like the kernel's own lookup; escapes are refused the same.
    As root the child runs as uid 65534 (setpriv), as another user as that user."""
    base = Path(tempfile.mkdtemp(prefix="trio-agent-beneath-", dir="/tmp"))
    try:
        ws, out = base / "ws", base / "out"
        (ws / "locked").mkdir(parents=True)
        (ws / "real").mkdir()
        out.mkdir()
        (ws / "real" / "f.txt").write_text("a\n")
        (ws / "lnk").symlink_to("real")
        (ws / "out").symlink_to(out)
        argv = [sys.executable, "-c", UNPRIVILEGED_CHILD, str(ws)]
        if os.geteuid() == 0:
            for path in (base, ws, out, ws / "locked", ws / "real", ws / "real" / "f.txt"):
                os.chown(path, 65534, 65534)
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        base.chmod(0o755)
        (ws / "locked").chmod(0o300)  # write and search, no read
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["uid"] != 0
        assert result["applied"] == "Success. Updated the following files:\nA locked/sub/new.txt\nM lnk/f.txt\n"
        refused = "Refusing path 'out/x.txt': it resolves outside the workspace through the symlink out"
        assert refused in result["escape"]
        (ws / "locked").chmod(0o700)
        assert (ws / "locked" / "sub" / "new.txt").read_text() == "hi\n"
        assert (ws / "real" / "f.txt").read_text() == "b\n" and list(out.iterdir()) == []
    finally:
        (base / "ws" / "locked").chmod(0o700)
        shutil.rmtree(base)
