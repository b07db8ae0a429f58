from __future__ import annotations

import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent._tools import _patch_commit as patch_commit
from trio_agent._tools.apply_patch import (
    FileChange,
    Hunk,
    Patch,
    PatchError,
    apply_hunks,
    apply_patch,
    apply_patch_to_workspace,
    parse_patch,
)


def wrap(*body: str) -> str:
    return "\n".join(("*** Begin Patch", *body, "*** End Patch")) + "\n"


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# --------------------------------------------------------------------------- parser

PARSE_CASES = [
    pytest.param(
        wrap("*** Add File: a/new.txt", "+line one", "+line two"),
        (FileChange("add", "a/new.txt", new_lines=("line one", "line two")),),
        id="add",
    ),
    pytest.param(
        wrap("*** Add File: empty.txt"),
        (FileChange("add", "empty.txt"),),
        id="add-empty",
    ),
    pytest.param(
        wrap("*** Delete File: old.txt"),
        (FileChange("delete", "old.txt"),),
        id="delete",
    ),
    pytest.param(
        wrap("*** Update File: s.py", "@@", " a", "-b", "+c", " d"),
        (FileChange("update", "s.py", hunks=(Hunk(None, ("a", "b", "d"), ("a", "c", "d")),)),),
        id="update",
    ),
    pytest.param(
        wrap("*** Update File: s.py", "-b", "+c"),
        (FileChange("update", "s.py", hunks=(Hunk(None, ("b",), ("c",)),)),),
        id="update-first-hunk-without-@@",
    ),
    pytest.param(
        wrap("*** Update File: s.py", "*** Move to: t.py", "@@ def f():", "-x", "+y"),
        (
            FileChange(
                "update", "s.py", move_to="t.py", hunks=(Hunk("def f():", ("x",), ("y",)),)
            ),
        ),
        id="move-with-header",
    ),
    pytest.param(
        wrap("*** Update File: s.py", "@@ class A:", " k", "-x", "@@ class B:", "+y", ""),
        (
            FileChange(
                "update",
                "s.py",
                hunks=(Hunk("class A:", ("k", "x"), ("k",)), Hunk("class B:", ("",), ("y", ""))),
            ),
        ),
        id="multiple-hunks-and-blank-context",
    ),
    pytest.param(
        wrap("*** Update File: s.py", "@@", "-last", "+LAST", "*** End of File"),
        (FileChange("update", "s.py", hunks=(Hunk(None, ("last",), ("LAST",), True),)),),
        id="end-of-file",
    ),
    pytest.param(
        wrap("*** Update File: s.py", "@@ -1,2 +1,2 @@", "-a", "+b"),
        (FileChange("update", "s.py", hunks=(Hunk(None, ("a",), ("b",)),)),),
        id="unified-range-header-ignored",
    ),
    pytest.param(
        wrap("*** Add File: x", "+1", "", "*** Delete File: y", "*** Update File: z", "+q"),
        (
            FileChange("add", "x", new_lines=("1",)),
            FileChange("delete", "y"),
            FileChange("update", "z", hunks=(Hunk(None, (), ("q",)),)),
        ),
        id="several-operations",
    ),
    pytest.param(
        "\n  <<'EOF'\n" + wrap("*** Delete File: y") + "EOF\n",
        (FileChange("delete", "y"),),
        id="heredoc",
    ),
    pytest.param(
        wrap("*** Add File: crlf.txt", "+x").replace("\n", "\r\n"),
        (FileChange("add", "crlf.txt", new_lines=("x",)),),
        id="crlf-patch",
    ),
]


@pytest.mark.parametrize(("text", "changes"), PARSE_CASES)
def test_parse(text: str, changes: tuple[FileChange, ...]) -> None:
    assert parse_patch(text) == Patch(changes)


BAD_CASES = [
    pytest.param("", None, "The patch is empty", id="empty"),
    pytest.param(" \n\n", None, "The patch is empty", id="blank"),
    pytest.param("*** Add File: x\n+a\n*** End Patch", 1, "must be '*** Begin Patch'", id="no-begin"),
    pytest.param("*** Begin Patch\n*** Add File: x\n+a\n", 3, "must be '*** End Patch'", id="no-end"),
    pytest.param("*** Begin Patch", 1, "must be '*** End Patch'", id="begin-only"),
    pytest.param(wrap(), 2, "no file operations", id="no-operations"),
    pytest.param(wrap("*** Frobnicate File: x"), 2, "expected a file operation", id="bad-op"),
    pytest.param(wrap("*** Add File: x", "no plus"), 3, "start with '+'", id="add-no-plus"),
    pytest.param(wrap("*** Add File:   "), 2, "needs a file path", id="no-path"),
    pytest.param(wrap("*** Update File: x"), 2, "has no hunks", id="update-no-hunks"),
    pytest.param(wrap("*** Update File: x", "@@"), 3, "hunk has no lines", id="empty-hunk"),
    pytest.param(
        wrap("*** Update File: x", "@@", "-a", "@@", "*** End of File"),
        5,
        "hunk has no lines",
        id="eof-only-hunk",
    ),
    pytest.param(wrap("*** Update File: x", "junk"), 3, "unexpected line 'junk'", id="junk-1"),
    pytest.param(
        wrap("*** Update File: x", "@@", "-a", "junk"), 5, "unexpected line 'junk'", id="junk-2"
    ),
]


@pytest.mark.parametrize(("text", "line", "fragment"), BAD_CASES)
def test_parse_errors(text: str, line: int | None, fragment: str) -> None:
    with pytest.raises(PatchError) as info:
        parse_patch(text)
    assert info.value.line == line
    assert fragment in str(info.value)
    if line is not None:
        assert str(info.value).startswith(f"Invalid patch at line {line}: ")


# --------------------------------------------------------------------------- hunk matching

HUNK_CASES = [
    pytest.param(["a", "b", "c"], [Hunk(None, ("b",), ("B",))], ["a", "B", "c"], id="exact"),
    pytest.param(["a  ", "b"], [Hunk(None, ("a", "b"), ("x",))], ["x"], id="rstrip"),
    pytest.param(["  a", "b"], [Hunk(None, (" a ",), ("z",))], ["z", "b"], id="strip"),
    pytest.param(
        ["x", "def f():", "x", "def g():", "x"],
        [Hunk("def g():", ("x",), ("y",))],
        ["x", "def f():", "x", "def g():", "y"],
        id="header-moves-search",
    ),
    pytest.param(
        ["x", "y", "x"], [Hunk(None, ("x",), ("1",)), Hunk(None, ("x",), ("2",))], ["1", "y", "2"],
        id="hunks-in-order",
    ),
    pytest.param(
        ["x", "y", "x"], [Hunk(None, ("x",), ("E",), True)], ["x", "y", "E"], id="end-of-file"
    ),
    pytest.param(["a"], [Hunk(None, (), ("b",))], ["a", "b"], id="pure-append"),
    pytest.param(
        ["class A:", "    pass", "z"],
        [Hunk("class A:", (), ("    x = 1",))],
        ["class A:", "    x = 1", "    pass", "z"],
        id="pure-insert-after-header",
    ),
    pytest.param(
        ["a", "b"], [Hunk(None, ("a", ""), ("A", ""))], ["A", "b"], id="trailing-blank-dropped"
    ),
]


@pytest.mark.parametrize(("lines", "hunks", "expected"), HUNK_CASES)
def test_apply_hunks(lines: list[str], hunks: list[Hunk], expected: list[str]) -> None:
    assert apply_hunks(lines, hunks, "f.txt") == expected


def test_apply_hunks_mismatch_names_file_and_lines() -> None:
    with pytest.raises(PatchError) as info:
        apply_hunks(["a", "b"], [Hunk(None, ("b",), ()), Hunk(None, ("a", "q"), ())], "f.txt")
    message = str(info.value)
    assert message.startswith("Failed to find expected lines in f.txt (hunk 2):\na\nq\n")
    assert "after the previous hunk" in message


def test_apply_hunks_missing_header() -> None:
    with pytest.raises(PatchError, match=r"Failed to find context '@@ def nope\(\):' in f.txt"):
        apply_hunks(["a"], [Hunk("def nope():", ("a",), ())], "f.txt")


def test_end_of_file_hunk_must_be_at_end() -> None:
    with pytest.raises(PatchError, match="at the end of the file"):
        apply_hunks(["x", "y"], [Hunk(None, ("x",), ("z",), True)], "f.txt")


# --------------------------------------------------------------------------- workspace


def test_add_update_delete_and_summary(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "c.txt").write_text("bye\n")
    patch = wrap(
        "*** Delete File: c.txt",
        "*** Update File: b.txt",
        "@@",
        " one",
        "-two",
        "+TWO",
        "*** Add File: sub/dir/a.txt",
        "+hello",
        "+world",
    )
    result = apply_patch_to_workspace(patch, tmp_path)
    assert result == "Success. Updated the following files:\nA sub/dir/a.txt\nM b.txt\nD c.txt\n"
    assert snapshot(tmp_path) == {
        "b.txt": b"one\nTWO\nthree\n",
        "sub/dir/a.txt": b"hello\nworld\n",
    }


def test_move_reports_new_path_and_keeps_mode(tmp_path: Path) -> None:
    src = tmp_path / "src.py"
    src.write_text("def f():\n    return 1\n")
    src.chmod(0o754)
    patch = wrap(
        "*** Update File: src.py",
        "*** Move to: pkg/dst.py",
        "@@ def f():",
        "-    return 1",
        "+    return 2",
    )
    result = apply_patch_to_workspace(patch, tmp_path)
    assert result == "Success. Updated the following files:\nM pkg/dst.py\n"
    assert snapshot(tmp_path) == {"pkg/dst.py": b"def f():\n    return 2\n"}
    assert stat.S_IMODE((tmp_path / "pkg/dst.py").stat().st_mode) == 0o754


def test_update_preserves_mode_and_adds_final_newline(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_bytes(b"#!/bin/sh\necho hi")
    target.chmod(0o751)
    apply_patch_to_workspace(wrap("*** Update File: run.sh", "-echo hi", "+echo bye"), tmp_path)
    assert target.read_bytes() == b"#!/bin/sh\necho bye\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["run.sh"]  # no temp files left behind


def test_update_keeps_crlf_line_endings(tmp_path: Path) -> None:
    target = tmp_path / "w.txt"
    target.write_bytes(b"a\r\nb\r\n")
    apply_patch_to_workspace(wrap("*** Update File: w.txt", " a", "-b", "+c"), tmp_path)
    assert target.read_bytes() == b"a\r\nc\r\n"


def test_later_operations_see_earlier_ones(tmp_path: Path) -> None:
    patch = wrap(
        "*** Add File: n.txt",
        "+v1",
        "*** Update File: n.txt",
        "-v1",
        "+v2",
    )
    result = apply_patch_to_workspace(patch, tmp_path)
    assert result == "Success. Updated the following files:\nA n.txt\nM n.txt\n"
    assert (tmp_path / "n.txt").read_text() == "v2\n"


def test_update_through_internal_symlink_keeps_link(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("x\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    apply_patch_to_workspace(wrap("*** Update File: link.txt", "-x", "+y"), tmp_path)
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "y\n"


async def test_async_wrapper(tmp_path: Path) -> None:
    result = await apply_patch(wrap("*** Add File: a.txt", "+hi"), tmp_path)
    assert result == "Success. Updated the following files:\nA a.txt\n"
    assert snapshot(tmp_path) == {"a.txt": b"hi\n"}


async def test_async_wrapper_raises_patch_error(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match=r"Cannot delete nope\.txt: file does not exist"):
        await apply_patch(wrap("*** Delete File: nope.txt"), tmp_path)


ERROR_CASES = [
    pytest.param(
        wrap("*** Add File: exists.txt", "+x"),
        "Cannot add exists.txt: file already exists. Use '*** Update File: exists.txt'",
        id="add-existing",
    ),
    pytest.param(
        wrap("*** Delete File: missing.txt"),
        "Cannot delete missing.txt: file does not exist.",
        id="delete-missing",
    ),
    pytest.param(
        wrap("*** Update File: missing.txt", "-a", "+b"),
        "Cannot update missing.txt: file does not exist. Use '*** Add File: missing.txt'",
        id="update-missing",
    ),
    pytest.param(
        wrap("*** Update File: dir", "-a", "+b"),
        "Cannot update dir: it is not a regular file.",
        id="update-directory",
    ),
    pytest.param(
        wrap("*** Add File: exists.txt/inner", "+x"),
        "Cannot create exists.txt/inner: exists.txt is a file, not a directory.",
        id="add-below-file",
    ),
    pytest.param(
        wrap("*** Update File: exists.txt", "-nope", "+b"),
        "Failed to find expected lines in exists.txt (hunk 1):\nnope\n",
        id="hunk-mismatch",
    ),
]


@pytest.mark.parametrize(("patch", "fragment"), ERROR_CASES)
def test_apply_errors(tmp_path: Path, patch: str, fragment: str) -> None:
    (tmp_path / "exists.txt").write_text("content\n")
    (tmp_path / "dir").mkdir()
    before = snapshot(tmp_path)
    with pytest.raises(PatchError) as info:
        apply_patch_to_workspace(patch, tmp_path)
    assert fragment in str(info.value)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        pytest.param("/etc/passwd", "absolute paths are not allowed", id="absolute"),
        pytest.param("C:\\x.txt", "absolute paths are not allowed", id="windows-drive"),
        pytest.param("../x", "resolves outside the workspace", id="parent"),
        pytest.param("a/../../x", "resolves outside the workspace", id="sneaky-parent"),
        pytest.param("out/x", "resolves outside the workspace", id="symlinked-dir"),
        pytest.param("outfile", "resolves outside the workspace", id="symlinked-file"),
        pytest.param(".", "names the workspace root", id="root"),
    ],
)
@pytest.mark.parametrize("op", ["Add File", "Delete File", "Update File"])
def test_refuses_escapes(tmp_path: Path, path: str, fragment: str, op: str) -> None:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "x").write_text("secret\n")
    (workspace / "out").symlink_to(outside)
    (workspace / "outfile").symlink_to(outside / "x")
    body = ["+x"] if op == "Add File" else (["-secret", "+pwned"] if op == "Update File" else [])
    patch = wrap("*** Add File: fine.txt", "+ok", f"*** {op}: {path}", *body)
    with pytest.raises(PatchError, match=f"Refusing path .*{fragment}"):
        apply_patch_to_workspace(patch, workspace)
    assert sorted(p.name for p in workspace.iterdir()) == ["out", "outfile"]
    assert snapshot(outside) == {"x": b"secret\n"}


def test_refuses_move_outside(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    patch = wrap("*** Update File: a.txt", "*** Move to: ../b.txt", "-x", "+y")
    with pytest.raises(PatchError, match=r"Refusing path '\.\./b\.txt'"):
        apply_patch_to_workspace(patch, tmp_path)
    assert snapshot(tmp_path) == {"a.txt": b"x\n"}


def test_failing_hunk_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("alpha\nbeta\n")
    (tmp_path / "bad.txt").write_text("gamma\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    before = snapshot(tmp_path)
    patch = wrap(
        "*** Add File: new.txt",
        "+fresh",
        "*** Delete File: gone.txt",
        "*** Update File: good.txt",
        "-alpha",
        "+ALPHA",
        "*** Update File: bad.txt",
        "-no such line",
        "+whatever",
    )
    with pytest.raises(PatchError, match=r"Failed to find expected lines in bad.txt"):
        apply_patch_to_workspace(patch, tmp_path)
    assert snapshot(tmp_path) == before


def test_second_hunk_failure_in_same_file_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\nc\n")
    patch = wrap("*** Update File: f.txt", "@@", "-a", "+A", "@@", "-zzz", "+Z")
    with pytest.raises(PatchError, match=r"\(hunk 2\):\nzzz\n"):
        apply_patch_to_workspace(patch, tmp_path)
    assert (tmp_path / "f.txt").read_text() == "a\nb\nc\n"


def test_write_failure_leaves_no_partial_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "one.txt").write_text("old\n")
    (tmp_path / "two.txt").write_text("old\n")
    real_stage = patch_commit._stage
    calls: list[str] = []

    def flaky_stage(directory: int, name: str, data: bytes, mode: int | None) -> str:
        calls.append(name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_stage(directory, name, data, mode)

    monkeypatch.setattr(patch_commit, "_stage", flaky_stage)
    patch = wrap(
        "*** Update File: one.txt", "-old", "+new", "*** Update File: two.txt", "-old", "+new"
    )
    with pytest.raises(PatchError, match=r"No space left on device\. No files were changed"):
        apply_patch_to_workspace(patch, tmp_path)
    assert len(calls) == 2
    assert snapshot(tmp_path) == {"one.txt": b"old\n", "two.txt": b"old\n"}  # temp file removed


# --------------------------------------------------------------------------- properties

LINE = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)))


def _replace_patch(lines: list[str], index: int, replacement: str, path: str) -> str:
    before = lines[max(0, index - 3) : index]
    after = lines[index + 1 : index + 4]
    body = [f" {x}" for x in before] + [f"-{lines[index]}", f"+{replacement}"]
    body += [f" {x}" for x in after]
    return wrap(f"*** Update File: {path}", "@@", *body)


@st.composite
def edits(draw: st.DrawFn) -> tuple[list[str], int, str]:
    lines = draw(st.lists(LINE, min_size=1, max_size=30, unique=True))
    index = draw(st.integers(0, len(lines) - 1))
    return lines, index, draw(LINE)


@given(edits())
def test_round_trip_pure(edit: tuple[list[str], int, str]) -> None:
    lines, index, replacement = edit
    (change,) = parse_patch(_replace_patch(lines, index, replacement, "f.txt")).changes
    expected = [*lines[:index], replacement, *lines[index + 1 :]]
    assert apply_hunks(lines, change.hunks, "f.txt") == expected


@settings(max_examples=30)
@given(edits(), st.booleans())
def test_round_trip_on_disk(edit: tuple[list[str], int, str], final_newline: bool) -> None:
    lines, index, replacement = edit
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # A file whose last line is empty necessarily ends with a newline.
        final_newline = final_newline or lines[-1] == ""
        text = "\n".join(lines) + ("\n" if final_newline else "")
        (root / "f.txt").write_bytes(text.encode("utf-8", "surrogateescape"))
        result = apply_patch_to_workspace(_replace_patch(lines, index, replacement, "f.txt"), root)
        assert result == "Success. Updated the following files:\nM f.txt\n"
        expected = [*lines[:index], replacement, *lines[index + 1 :]]
        assert (root / "f.txt").read_bytes() == "".join(f"{x}\n" for x in expected).encode()
