"""The flags building the sandbox's ``/run`` (``_sandbox_run.run_flags``), on a tree of
our own standing for ``/run``: what each kind of entry becomes, and where the rebuild
gives way to the masks in place (the walk's or the rebuild's bounds reached, a shown
path at or above it). The behaviour under real ``bwrap`` is in
``tests/acceptance/test_sandbox_run_churn.py``."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from trio_agent._tools import _sandbox_fds, _sandbox_run

_built: list[_sandbox_run.RunFlags] = []  # closed after each test (close_descriptors)


def run_flags(replaced: list[str], shown: list[str], root: str,
              options: frozenset[str] | None = None) -> _sandbox_run.RunFlags:
    """``_sandbox_run.run_flags``, its descriptors (the rebuild's copies and binds)
    closed after the test."""
    flags = _sandbox_run.run_flags(replaced, shown, root, options)
    _built.append(flags)
    return flags


@pytest.fixture(autouse=True)
def close_descriptors() -> Iterator[None]:
    yield
    while _built:
        flags = _built.pop()
        while flags.fds:
            os.close(flags.fds.pop())


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A /run: a service directory holding a socket and a pid file, a socket at the
    top, a directory without sockets, a link, a directory everyone may write."""
    top = tmp_path / "run"
    (top / "svc").mkdir(parents=True)
    (top / "svc" / "svc.pid").write_text("1\n")
    (top / "quiet").mkdir()
    (top / "utmp").write_text("")
    (top / "shm").symlink_to("/dev/shm")
    (top / "lock").mkdir(mode=0o777)
    (top / "lock").chmod(0o1777)
    (top / "user").mkdir()
    sockets = [socket.socket(socket.AF_UNIX) for _ in range(2)]
    sockets[0].bind(str(top / "svc" / "sock"))
    sockets[1].bind(str(top / "engine.sock"))
    try:
        yield top
    finally:
        for each in sockets:
            each.close()


@contextmanager
def closing(flags: _sandbox_run.RunFlags) -> Iterator[_sandbox_run.RunFlags]:
    """``flags``, their descriptors closed afterwards (as the spawn path does)."""
    try:
        yield flags
    finally:
        while flags.fds:
            os.close(flags.fds.pop())


def described(flags: _sandbox_run.RunFlags, option: str, path: str) -> object:
    """What puts ``path`` back through a descriptor: its content for ``--file``, else the
    descriptor (one ``flags.fds`` holds)."""
    line = flags.rebuild
    at = next(i for i in range(len(line) - 2) if line[i] == option and line[i + 2] == path)
    fd = int(line[at + 1])
    assert fd in flags.fds
    if option == "--file":
        return os.pread(fd, 1 << 20, 0)
    return fd


def triples(flags: list[str]) -> set[tuple[str, ...]]:
    return {tuple(flags[i:i + 3]) for i in range(len(flags))}


def test_each_entry_is_put_back_in_a_tmpfs_sealed_last(root: Path) -> None:
    flags = run_flags([str(root / "user")], [], str(root))
    assert flags.rebuild[:2] == ["--tmpfs", str(root)] and flags.seal == ["--remount-ro", str(root)]
    assert flags.in_place == []
    expected = {
        ("--ro-bind", "/dev/null", f"{root}/engine.sock"),  # a socket: /dev/null, as before
        ("--ro-bind", "/dev/null", f"{root}/svc/sock"),
        ("--symlink", "/dev/shm", f"{root}/shm"),  # a link: a link
        ("--ro-bind-try", f"{root}/quiet", f"{root}/quiet"),  # a directory without sockets: whole, live
    }
    assert expected <= triples(flags.rebuild), flags.rebuild
    # A small file: copied through a descriptor (no mount; one gone since it was opened copied all the same).
    assert described(flags, "--file", f"{root}/utmp") == b""
    assert described(flags, "--file", f"{root}/svc/svc.pid") == b"1\n"
    line = " ".join(flags.rebuild)
    assert f"--dir {root}/svc " in line and f"--dir {root}/lock " in line  # rebuilt; hidden whole (empty)
    assert f"{root}/user" not in line  # a hidden root: its own tmpfs comes later
    assert line.index(f"--dir {root}/svc ") < line.index(f"{root}/svc/sock")


def test_a_shown_path_holding_run_leaves_the_masks_in_place(root: Path) -> None:
    # The workspace is / (or holds /run): its bind would cover a rebuilt /run.
    flags = run_flags([], [str(root.parent)], str(root))
    assert flags.rebuild == [] and flags.seal == []
    assert triples(flags.in_place) >= {("--ro-bind", "/dev/null", f"{root}/svc/sock"),
                                       ("--tmpfs", f"{root}/lock", "--remount-ro")}


def test_a_socket_holding_directory_that_is_shown_is_bound_back_and_masked_in_place(root: Path) -> None:
    flags = run_flags([], [str(root / "svc")], str(root))  # a workspace under /run holding a socket
    assert ("--ro-bind-try", f"{root}/svc", f"{root}/svc") in triples(flags.rebuild)
    assert flags.in_place == ["--ro-bind", "/dev/null", f"{root}/svc/sock"]


def test_beyond_the_rebuild_budget_a_directory_is_masked_in_place(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sandbox_run, "REBUILD_ENTRIES", len(os.listdir(root)))  # /run's own entries only
    flags = run_flags([], [], str(root))
    assert ("--ro-bind-try", f"{root}/svc", f"{root}/svc") in triples(flags.rebuild)
    assert flags.in_place == ["--ro-bind", "/dev/null", f"{root}/svc/sock"]
    assert flags.seal == ["--remount-ro", str(root)]


def test_a_walk_cut_short_rebuilds_nothing(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A listing the walk's budget ended inside would drop the entries not listed.
    monkeypatch.setattr(_sandbox_run, "RUN_ENTRIES", 2)
    flags = run_flags([], [], str(root))
    assert flags.rebuild == [] and flags.seal == []


def test_an_unlistable_run_gives_no_flags(tmp_path: Path) -> None:
    flags = run_flags([], [], str(tmp_path / "missing"))
    assert (flags.rebuild, flags.in_place, flags.seal) == ([], [], [])


def test_a_budget_spent_deep_down_leaves_the_shallow_directories_rebuilt(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /run/udev/data holds an entry per device: the walk is breadth first, so a budget
    # spent there does not leave /run and the service directories listed in part.
    data = root / "udev" / "data"
    data.mkdir(parents=True)
    for n in range(50):
        (data / f"c{n}").write_text("")
    shallow = len(os.listdir(root)) + len(os.listdir(root / "svc")) + len(os.listdir(root / "udev"))
    monkeypatch.setattr(_sandbox_run, "RUN_ENTRIES", shallow + 10)
    flags = run_flags([str(root / "user")], [], str(root))
    assert ("--ro-bind", "/dev/null", f"{root}/svc/sock") in triples(flags.rebuild)
    assert ("--ro-bind-try", f"{root}/udev", f"{root}/udev") in triples(flags.rebuild)
    assert flags.in_place == [] and flags.seal == ["--remount-ro", str(root)]


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory owned by another user needs root (CI runs as root)")
def test_another_users_directory_is_rebuilt_through_descriptors(root: Path) -> None:
    # bwrap resolves a bound path following links, so another user's entries (and those
    # of a directory others may write: it holds the workspace) are put back through
    # descriptors opened without following links (sec7; sec6 bound such a directory back
    # whole and masked its sockets in place, racing the host). Root's stay bound by path.
    (root / "other" / "inner").mkdir(parents=True)
    (root / "other" / "other.pid").write_text("1\n")
    (root / "lock" / "workspace").mkdir()
    with socket.socket(socket.AF_UNIX) as other, socket.socket(socket.AF_UNIX) as locked:
        other.bind(str(root / "other" / "sock"))
        locked.bind(str(root / "lock" / "sock"))
        os.chown(root / "other", 4242, 4242)
        flags = run_flags([], [str(root / "lock" / "workspace")], str(root))
    with closing(flags):
        assert {("--ro-bind", "/dev/null", f"{root}/other/sock"), ("--ro-bind", "/dev/null", f"{root}/lock/sock"),
                ("--ro-bind-try", f"{root}/quiet", f"{root}/quiet")} <= triples(flags.rebuild)  # root's: by path
        assert f"--dir {root}/other " in " ".join(flags.rebuild) and flags.in_place == []
        assert described(flags, "--file", f"{root}/other/other.pid") == b"1\n"  # a copy of what was walked
        inner = os.fstat(int(str(described(flags, "--ro-bind-fd", f"{root}/other/inner"))))
        assert (inner.st_dev, inner.st_ino) == (os.stat(root / "other" / "inner").st_dev,
                                                os.stat(root / "other" / "inner").st_ino)
        assert isinstance(described(flags, "--ro-bind-fd", f"{root}/lock/workspace"), int)
        line = flags.rebuild  # nothing of theirs bound by its path
        assert not any(line[i + 1].startswith((f"{root}/other", f"{root}/lock"))
                       for i in range(len(line) - 1) if line[i] == "--ro-bind-try")
    os.chown(root, 4242, 4242)  # /run itself another user's: rebuilt the same way
    with closing(run_flags([], [], str(root))) as flags:
        assert flags.rebuild[:2] == ["--tmpfs", str(root)] and flags.in_place == []
        assert ("--ro-bind", "/dev/null", f"{root}/svc/sock") in triples(flags.rebuild)
        assert described(flags, "--file", f"{root}/utmp") == b""


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory owned by another user needs root (CI runs as root)")
def test_an_entry_of_another_user_changed_since_the_walk_is_not_put_back(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between the walk and the rebuild's opens: the pid file swapped for a link (to what
    # the sandbox hides), the inner directory for a file, a file removed. Neither is
    # followed nor put back; what did not change is; a file grown huge is bound; one
    # replaced by renaming its next version over it is that version (as by path).
    other = root / "other"
    (other / "inner").mkdir(parents=True)
    for name in ("swapped.pid", "kept.pid", "removed.pid", "grown.pid", "replaced.pid"):
        (other / name).write_text("1\n")
    walk = _sandbox_run._Walk.run

    def walk_then_change(self: object, top: str) -> object:
        listing = walk(self, top)  # type: ignore[arg-type]
        (other / ".link").symlink_to(root / "user")
        (other / ".link").rename(other / "swapped.pid")
        (other / "inner").rename(other / ".old")
        (other / "inner").write_text("not a directory\n")
        (other / "removed.pid").unlink()
        (other / ".new").write_text("2\n")
        (other / ".new").rename(other / "replaced.pid")  # its next version: the current one is put back
        os.truncate(other / "grown.pid", 1 << 40)  # sparse: bwrap would copy a terabyte of zeros
        return listing

    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(other / "sock"))
        os.chown(other, 4242, 4242)
        monkeypatch.setattr(_sandbox_run._Walk, "run", walk_then_change)
        with closing(run_flags([], [], str(root))) as flags:
            assert ("--ro-bind", "/dev/null", f"{other}/sock") in triples(flags.rebuild)
            assert described(flags, "--file", f"{other}/kept.pid") == b"1\n"  # the positive control
            for name in ("swapped.pid", "inner", "removed.pid"):
                assert f"{other}/{name}" not in flags.rebuild, name
            assert isinstance(described(flags, "--ro-bind-fd", f"{other}/grown.pid"), int)  # bound, not copied
            assert described(flags, "--file", f"{other}/replaced.pid") == b"2\n"  # as a bind by path shows it
            line = flags.rebuild
            assert sum(line[i] in ("--file", "--ro-bind-fd") and line[i + 2].startswith(f"{other}/")
                       for i in range(len(line) - 2)) == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory owned by another user needs root (CI runs as root)")
def test_a_large_file_of_another_user_is_bound_by_its_descriptor(root: Path) -> None:
    other = root / "other"
    other.mkdir()
    (other / "big").write_bytes(b"x" * (_sandbox_run.COPY_BYTES + 1))
    (other / "small").write_bytes(b"x" * _sandbox_run.COPY_BYTES)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(other / "sock"))
        os.chown(other, 4242, 4242)
        with closing(run_flags([], [], str(root))) as flags:
            assert isinstance(described(flags, "--ro-bind-fd", f"{other}/big"), int)
            assert described(flags, "--file", f"{other}/small") == b"x" * _sandbox_run.COPY_BYTES
            assert all(fd >= 3 for fd in flags.fds)


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory owned by another user needs root (CI runs as root)")
def test_beyond_the_descriptor_budget_another_users_directory_is_masked_in_place(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At most FD_ENTRIES descriptors (and a quarter of RLIMIT_NOFILE): beyond, another
    # user's directory is bound back whole by its path (root's directories above it: no
    # link to follow there) and its sockets masked in place, as in sec6.
    (root / "other").mkdir()
    (root / "other" / "other.pid").write_text("1\n")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "other" / "sock"))
        os.chown(root / "other", 4242, 4242)
        monkeypatch.setattr(_sandbox_run, "FD_ENTRIES", 0)
        with closing(run_flags([], [], str(root))) as flags:
            assert ("--ro-bind-try", f"{root}/other", f"{root}/other") in triples(flags.rebuild)
            assert flags.in_place == ["--ro-bind", "/dev/null", f"{root}/other/sock"] and flags.fds == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory owned by another user needs root (CI runs as root)")
def test_neither_another_user_nor_one_big_directory_spends_the_walks_budget(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service user's tree (hog: five directories of nine files) and one big directory
    # of root's (data, as /run/udev/data), listed first at each level: the budget spent
    # there left root's sys/journal unlisted, bound back whole, its socket reachable
    # (sec6). Root's and the agent's directories are listed first, at most DIR_ENTRIES
    # entries of each: each half alone still fails.
    for n in range(5):
        (root / "hog" / f"h{n}").mkdir(parents=True)
        for m in range(9):
            (root / "hog" / f"h{n}" / f"f{m}").write_text("")
    os.chown(root / "hog", 4242, 4242)
    (root / "data").mkdir()
    for n in range(30):
        (root / "data" / f"d{n}").write_text("")
    (root / "sys" / "journal").mkdir(parents=True)
    real_scandir = os.scandir

    @contextmanager
    def hog_and_data_first(path: str) -> Iterator[list[os.DirEntry[str]]]:
        with real_scandir(path) as entries:
            yield sorted(entries, key=lambda entry: (entry.name not in ("hog", "data"), entry.name))

    with socket.socket(socket.AF_UNIX) as journal:
        journal.bind(str(root / "sys" / "journal" / "sock"))
        monkeypatch.setattr(os, "scandir", hog_and_data_first)
        monkeypatch.setattr(_sandbox_run, "RUN_ENTRIES", 30)
        monkeypatch.setattr(_sandbox_run, "DIR_ENTRIES", 10, raising=False)
        flags = run_flags([str(root / "user")], [], str(root))
    masks = triples(flags.rebuild + flags.in_place)
    assert ("--ro-bind", "/dev/null", f"{root}/sys/journal/sock") in masks, flags.rebuild
    assert ("--ro-bind", "/dev/null", f"{root}/svc/sock") in masks
    assert ("--ro-bind-try", f"{root}/data", f"{root}/data") in masks  # cut: bound back whole


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory owned by another user needs root (CI runs as root)")
def test_beyond_the_masks_budget_another_users_directory_is_hidden_whole(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bwrap takes at most 9,000 arguments: another user's tree of thousands of sockets
    # (each masked in place: it is not rebuilt) failed every command (sec6). Beyond
    # MASK_ENTRIES its directory is hidden whole; a small one is still masked alone.
    for name in ("hog", "small"):
        (root / name / "inner").mkdir(parents=True)
        (root / name / "pid").write_text("1\n")
    with ExitStack() as stack:
        for name, count in (("hog", 6), ("small", 1)):
            for n in range(count):
                stack.enter_context(socket.socket(socket.AF_UNIX)).bind(str(root / name / "inner" / f"s{n}"))
            os.chown(root / name, 4242, 4242)
        monkeypatch.setattr(_sandbox_run, "MASK_ENTRIES", 4, raising=False)
        monkeypatch.setattr(_sandbox_run, "FD_ENTRIES", 0)  # not rebuilt (another user's): masked in place
        flags = run_flags([str(root / "user")], [], str(root))
    assert ("--tmpfs", f"{root}/hog", "--remount-ro") in triples(flags.in_place), flags.in_place
    assert not any(f"{root}/hog/" in flag for flag in flags.in_place)
    assert ("--ro-bind", "/dev/null", f"{root}/small/inner/s0") in triples(flags.in_place)
    assert ("--ro-bind-try", f"{root}/small", f"{root}/small") in triples(flags.rebuild)  # its pid file reads


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory owned by another user needs root (CI runs as root)")
def test_a_directory_of_another_user_swapped_for_a_link_before_its_listing_lists_nothing_hidden(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Listed after its parent, by its path, a subdirectory swapped for a link in between
    # listed what the link leads to: a hidden runtime directory's names (its bus masked
    # by name, its links recreated). Another user's directories are listed through a
    # descriptor reached without following a link: the swapped one is not listable.
    hidden = root / "user" / "1000"
    hidden.mkdir(parents=True)
    (root / "other" / "sub").mkdir(parents=True)
    (root / "other" / "kept").mkdir()
    with ExitStack() as stack:
        for path in (hidden / "bus", root / "other" / "sub" / "sock", root / "other" / "kept" / "sock"):
            stack.enter_context(socket.socket(socket.AF_UNIX)).bind(str(path))
        os.chown(root / "other", 4242, 4242)
        listed = _sandbox_run._Walk._list

        def swap_before(self: object, found: object, depth: int) -> bool:
            if getattr(found, "path", None) == f"{root}/other/sub":
                (root / "other" / "sub").rename(root / "other" / ".old")
                (root / "other" / "sub").symlink_to(hidden)
            return listed(self, found, depth)  # type: ignore[arg-type]

        monkeypatch.setattr(_sandbox_run._Walk, "_list", swap_before)
        flags = run_flags([str(root / "user")], [], str(root))  # /run/user: hidden, not walked
    line = " ".join([*flags.rebuild, *flags.in_place])
    assert "bus" not in line, line  # before: --ro-bind /dev/null .../other/sub/bus
    assert ("--ro-bind", "/dev/null", f"{root}/other/kept/sock") in triples(flags.rebuild)  # the positive control


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory owned by another user needs root (CI runs as root)")
def test_a_bwrap_without_bind_fd_leaves_another_users_directory_to_the_masks_in_place(root: Path) -> None:
    # bwrap before 0.10 (without a backport) has no --ro-bind-fd, before 0.5 no --perms:
    # another user's directory is then bound whole by its path below root's (sec6's way)
    # and masked in place; root's files are still copied, without --perms.
    (root / "other").mkdir()
    (root / "other" / "other.pid").write_text("1\n")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "other" / "sock"))
        os.chown(root / "other", 4242, 4242)
        flags = run_flags([], [], str(root), options=frozenset({"--file", "--ro-bind-try"}))
    assert ("--ro-bind-try", f"{root}/other", f"{root}/other") in triples(flags.rebuild)
    assert flags.in_place == ["--ro-bind", "/dev/null", f"{root}/other/sock"]
    assert "--ro-bind-fd" not in flags.rebuild and "--perms" not in flags.rebuild
    assert described(flags, "--file", f"{root}/svc/svc.pid") == b"1\n"
    assert "--file" in _sandbox_fds.bwrap_options("bwrap")  # read from its --help
    assert _sandbox_fds.bwrap_options("/nonexistent/bwrap") == frozenset()


def test_without_memory_files_a_file_is_bound_by_path(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # memfd_create refused (a container's seccomp profile) or no descriptor left: the
    # copy gives way to the bind by path (root's), never to a failed command.
    def refused(name: str, flags: int = 0) -> int:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "memfd_create", refused)
    flags = run_flags([str(root / "user")], [], str(root))
    assert ("--ro-bind-try", f"{root}/svc/svc.pid", f"{root}/svc/svc.pid") in triples(flags.rebuild)
    assert "--file" not in flags.rebuild and flags.fds == []
