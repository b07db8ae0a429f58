""".git stays read-only for patches whatever the path is spelled as (issue 21, hole 5).

``plan_patch`` decides on what each path resolves to in the workspace, and
``apply_patch(protect_git=True)`` refuses a protected write itself, through directory
descriptors, so a symlink swapped in after the decision cannot reach ``.git`` either.
The positive controls: ``writable_git``, an approval naming the place, an unconfined
patch, and a normal file next to the link."""

from __future__ import annotations

from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._tools import apply_patch as apply_patch_module
from trio_agent._tools._policy import plan_patch
from trio_agent._tools.apply_patch import PatchError, apply_patch_to_workspace

NEVER, ON_REQUEST = ta.ApprovalPolicy.NEVER, ta.ApprovalPolicy.ON_REQUEST
WRITE = ta.Sandbox()
CONFIG = "[core]\n\tbare = false\n"


def wrap(*body: str) -> str:
    return "\n".join(("*** Begin Patch", *body, "*** End Patch")) + "\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A repository with ``g -> .git``, ``cfg -> .git/config`` and a normal file."""
    path = tmp_path / "ws"
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "config").write_text(CONFIG)
    (path / "src").mkdir()
    (path / "src" / "a.py").write_text("x = 1\n")
    (path / "g").symlink_to(".git")
    (path / "cfg").symlink_to(".git/config")
    return path


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# (patch, the change as the approval sees it, what it writes)
THROUGH_THE_LINK = [
    pytest.param(wrap("*** Update File: g/config", "@@", " [core]", "+\tfsmonitor = ./evil"),
                 ta.ChangedFile("g/config", "update"), "g/config (it resolves to .git/config)", id="update"),
    pytest.param(wrap("*** Add File: g/hooks/pre-commit", "+#!/bin/sh"),
                 ta.ChangedFile("g/hooks/pre-commit", "add"),
                 "g/hooks/pre-commit (it resolves to .git/hooks/pre-commit)", id="add"),
    pytest.param(wrap("*** Delete File: g/config"),
                 ta.ChangedFile("g/config", "delete"), "g/config (it resolves to .git/config)", id="delete"),
    pytest.param(wrap("*** Update File: src/a.py", "*** Move to: g/info/exclude", "-x = 1", "+*"),
                 ta.ChangedFile("src/a.py", "update", "g/info/exclude"),
                 "g/info/exclude (it resolves to .git/info/exclude)", id="move-in"),
    pytest.param(wrap("*** Update File: g/config", "*** Move to: stolen.txt", "@@", " [core]"),
                 ta.ChangedFile("g/config", "update", "stolen.txt"), "g/config (it resolves to .git/config)",
                 id="move-out"),
    pytest.param(wrap("*** Update File: cfg", "@@", " [core]", "+\tfsmonitor = ./evil"),
                 ta.ChangedFile("cfg", "update"), "cfg (it resolves to .git/config)", id="update-file-link"),
]


@pytest.mark.parametrize(("patch", "change", "shown"), THROUGH_THE_LINK)
def test_a_patch_through_a_link_to_git_is_refused_under_never(
    ws: Path, patch: str, change: ta.ChangedFile, shown: str
) -> None:
    plan = plan_patch(NEVER, WRITE, (change,), workspace=ws)
    assert plan.action == "refuse"
    assert f"it writes {shown}, and the sandbox keeps .git read-only" in plan.reason


@pytest.mark.parametrize(("patch", "change", "shown"), THROUGH_THE_LINK)
def test_a_patch_through_a_link_to_git_asks_under_on_request(
    ws: Path, patch: str, change: ta.ChangedFile, shown: str
) -> None:
    plan = plan_patch(ON_REQUEST, WRITE, (change,), workspace=ws)
    assert plan.action == "ask"
    assert plan.reason == f"it writes {shown}, and the sandbox keeps .git read-only"
    assert plan.git == {shown.split("resolves to ")[1].rstrip(")")}


@pytest.mark.parametrize(("patch", "change", "shown"), THROUGH_THE_LINK)
def test_apply_patch_itself_refuses_it_and_changes_nothing(
    ws: Path, patch: str, change: ta.ChangedFile, shown: str
) -> None:
    before = snapshot(ws)
    with pytest.raises(PatchError) as info:
        apply_patch_to_workspace(patch, ws, protect_git=True)
    assert f"Refusing to write {shown}: the sandbox keeps .git read-only" in str(info.value)
    assert snapshot(ws) == before


@pytest.mark.parametrize(("patch", "change", "shown"), THROUGH_THE_LINK)
def test_positive_controls_write_through_the_link(ws: Path, patch: str, change: ta.ChangedFile, shown: str) -> None:
    assert plan_patch(NEVER, ta.Sandbox(writable_git=True), (change,), workspace=ws).action == "run"
    assert plan_patch(NEVER, ta.Sandbox(ta.SandboxMode.DANGER_FULL_ACCESS), (change,), workspace=ws).action == "run"
    approved = plan_patch(ON_REQUEST, WRITE, (change,), workspace=ws).git
    before = snapshot(ws)
    apply_patch_to_workspace(patch, ws, protect_git=True, approved_git=approved)  # approved: written
    assert snapshot(ws) != before


def test_an_unconfined_patch_writes_git(ws: Path) -> None:
    apply_patch_to_workspace(wrap("*** Update File: g/config", "@@", " [core]", "+\tx = 1"), ws)
    assert (ws / ".git" / "config").read_text() == CONFIG.replace("[core]\n", "[core]\n\tx = 1\n")


def test_a_normal_file_next_to_the_link_is_written(ws: Path) -> None:
    change = ta.ChangedFile("src/a.py", "update")
    assert plan_patch(NEVER, WRITE, (change,), workspace=ws).action == "run"
    apply_patch_to_workspace(wrap("*** Update File: src/a.py", "-x = 1", "+x = 2"), ws, protect_git=True)
    assert (ws / "src" / "a.py").read_text() == "x = 2\n"


def test_deleting_a_link_into_git_only_removes_the_link(ws: Path) -> None:
    assert plan_patch(NEVER, WRITE, (ta.ChangedFile("cfg", "delete"),), workspace=ws).action == "run"
    apply_patch_to_workspace(wrap("*** Delete File: cfg"), ws, protect_git=True)
    assert not (ws / "cfg").is_symlink() and (ws / ".git" / "config").read_text() == CONFIG


def test_an_approval_covers_only_the_places_it_named(ws: Path) -> None:
    patch = wrap("*** Update File: g/config", "@@", " [core]", "+\tx = 1", "*** Add File: g/hooks/post-merge", "+x")
    with pytest.raises(PatchError, match=r"Refusing to write g/hooks/post-merge"):
        apply_patch_to_workspace(patch, ws, protect_git=True, approved_git={".git/config"})
    assert (ws / ".git" / "config").read_text() == CONFIG


@pytest.mark.parametrize(
    ("layout", "path"),
    [
        pytest.param({"sub/.git/config": CONFIG}, "sub/.git/config", id="nested-repository"),
        pytest.param({"sub/.git/config": CONFIG, "s->": "sub/.git"}, "s/config", id="link-to-nested-repository"),
        pytest.param({".GIT/config": CONFIG}, ".GIT/config", id="other-case"),
        pytest.param({".git": "gitdir: store\n", "store/config": CONFIG}, "store/config", id="worktree-gitdir"),
        pytest.param({".git": "gitdir: <ws>/store\n", "store/config": CONFIG}, "store/config",
                     id="worktree-absolute-gitdir"),
        pytest.param({".git": "gitdir: store\n", "store/config": CONFIG, "st->": "store"}, "st/config",
                     id="link-to-worktree-gitdir"),
        pytest.param({".git->": "store", "store/config": CONFIG}, "store/config", id="git-is-a-symlink"),
    ],
)
def test_other_git_dirs_are_protected(tmp_path: Path, layout: dict[str, str], path: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, content in layout.items():
        if name.endswith("->"):
            (ws / name[:-2]).symlink_to(content)
            continue
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(content.replace("<ws>", str(ws)))
    change = (ta.ChangedFile(path, "update"),)
    assert plan_patch(NEVER, WRITE, change, workspace=ws).action == "refuse"
    before = snapshot(ws)
    with pytest.raises(PatchError, match=r"the sandbox keeps \.git read-only"):
        apply_patch_to_workspace(wrap(f"*** Update File: {path}", "@@", " [core]", "+\tx = 1"), ws, protect_git=True)
    assert snapshot(ws) == before
    # Positive control: writable_git lets it through.
    assert plan_patch(NEVER, ta.Sandbox(writable_git=True), change, workspace=ws).action == "run"


def test_a_worktree_gitdir_outside_the_workspace_leaves_the_rest_writable(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "store").mkdir(parents=True)
    (ws / ".git").write_text(f"gitdir: {tmp_path}/main/.git/worktrees/ws\n")
    (ws / "store" / "config").write_text(CONFIG)
    assert plan_patch(NEVER, WRITE, (ta.ChangedFile("store/config", "update"),), workspace=ws).action == "run"


def test_read_only_names_the_git_write_in_its_reason(ws: Path) -> None:
    plan = plan_patch(ON_REQUEST, ta.Sandbox(ta.SandboxMode.READ_ONLY), (ta.ChangedFile("g/config", "update"),),
                      workspace=ws)
    assert plan.action == "ask" and plan.git == {".git/config"}
    assert plan.reason == "the sandbox is read-only, and it writes g/config (it resolves to .git/config)"


def test_a_link_to_git_swapped_in_after_planning_cannot_reach_git(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At write time: ``g`` is a normal directory when the patch is decided and planned,
    and a link to ``.git`` when it is committed."""
    (ws / "g").unlink()
    (ws / "g").mkdir()
    (ws / "g" / "config").write_text(CONFIG)
    assert plan_patch(NEVER, WRITE, (ta.ChangedFile("g/config", "update"),), workspace=ws).action == "run"
    real_commit = apply_patch_module._commit

    def commit(*args: object) -> None:
        (ws / "g").rename(ws / "g.parked")
        (ws / "g").symlink_to(".git")
        real_commit(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(apply_patch_module, "_commit", commit)
    with pytest.raises(PatchError, match="g changed while it was in use: it is now a symlink"):
        apply_patch_to_workspace(wrap("*** Update File: g/config", "@@", " [core]", "+\tx = 1"), ws, protect_git=True)
    assert (ws / ".git" / "config").read_text() == CONFIG
    assert (ws / "g.parked" / "config").read_text() == CONFIG
