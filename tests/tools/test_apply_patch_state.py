"""``apply_patch`` keeps the agents' state read-only as the sandbox does for commands
(``_sandbox.state_paths``; sec4's review): ``.codex`` and ``.agents`` at the top of the
workspace (also when missing: a patch may not create ``.codex/config.toml``), and
trio-agent's and codex's homes where the workspace holds them. Decided on the path a
patch resolves to (a link ``c -> .codex`` does not get round it), at plan time (the
approval policy: refused under ``never``, asked under ``on-request``) and at write
time (only what an approval named is written).

Positive controls: a ``.codex`` deeper down, the rest of the workspace, and a home that
is the workspace itself are written; an approved patch writes the place it named.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._tools._policy import plan_patch
from trio_agent._tools.apply_patch import PatchError, apply_patch_to_workspace

WRITE = ta.Sandbox(ta.SandboxMode.WORKSPACE_WRITE)


def add(path: str) -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    place = tmp_path / "home"
    (place / ".trio-agent" / "threads").mkdir(parents=True)
    (place / "src").mkdir()
    monkeypatch.setenv("HOME", str(place))
    monkeypatch.delenv("TRIO_AGENT_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return place


@pytest.mark.parametrize(("path", "kept"), [
    (".codex/config.toml", ".codex"),
    (".agents/skills/s.md", ".agents"),
    (".trio-agent/threads/t.jsonl", ".trio-agent"),
    ("c/config.toml", ".codex"),  # c -> .codex
])
def test_the_agents_state_is_not_written_unapproved(home: Path, path: str, kept: str) -> None:
    (home / ".codex").mkdir()
    (home / "c").symlink_to(".codex")
    with pytest.raises(PatchError, match=f"the sandbox keeps {kept} read-only"):
        apply_patch_to_workspace(add(path), home, protect_git=True)
    assert not (home / path).exists()
    plan = plan_patch(ta.ApprovalPolicy.NEVER, WRITE, [ta.ChangedFile(path, "add")], workspace=home)
    assert plan.action == "refuse" and f"keeps {kept} read-only" in plan.reason
    asked = plan_patch(ta.ApprovalPolicy.ON_REQUEST, WRITE, [ta.ChangedFile(path, "add")], workspace=home)
    assert asked.action == "ask"
    apply_patch_to_workspace(add(path), home, protect_git=True, approved_git=asked.git)  # approved: written
    assert (home / path).read_text() == "x\n"


@pytest.mark.parametrize("path", ["src/.codex/config.toml", "src/main.py", "notes.txt"])
def test_the_rest_of_the_workspace_is_written(home: Path, path: str) -> None:
    assert plan_patch(ta.ApprovalPolicy.NEVER, WRITE, [ta.ChangedFile(path, "add")], workspace=home).action == "run"
    apply_patch_to_workspace(add(path), home, protect_git=True)
    assert (home / path).read_text() == "x\n"


def test_a_home_that_is_the_workspace_is_written(home: Path) -> None:
    workspace = home / ".trio-agent"
    apply_patch_to_workspace(add("threads/t.jsonl"), workspace, protect_git=True)
    assert (workspace / "threads" / "t.jsonl").read_text() == "x\n"


GIT_WRITABLE = ta.Sandbox(ta.SandboxMode.WORKSPACE_WRITE, writable_git=True)


@pytest.mark.parametrize(("path", "kept"), [(".codex/config.toml", ".codex"), (".agents/skills/s.md", ".agents"),
                                            (".trio-agent/threads/t.jsonl", ".trio-agent")])
def test_writable_git_still_keeps_the_agents_state(home: Path, path: str, kept: str) -> None:
    """``writable_git`` opens ``.git`` to commands, not the agents' state: the sandbox binds
    that read-only in every confined mode, and a patch may not write it either (the
    guard was off altogether with ``writable_git``)."""
    # Decided on the resolved path, and for the top-level names on the spelling alone too
    # (no workspace: a home's place is not known then).
    for workspace in (home, None) if kept in (".codex", ".agents") else (home,):
        plan = plan_patch(ta.ApprovalPolicy.NEVER, GIT_WRITABLE, [ta.ChangedFile(path, "add")], workspace=workspace)
        assert plan.action == "refuse" and f"keeps {kept} read-only" in plan.reason
    with pytest.raises(PatchError, match=f"the sandbox keeps {kept} read-only"):
        apply_patch_to_workspace(add(path), home, protect_state=True)
    assert not (home / path).exists()


def test_writable_git_writes_git(home: Path) -> None:
    """The positive control: with ``writable_git`` a patch writes ``.git`` unasked."""
    (home / ".git").mkdir()
    for workspace in (home, None):
        plan = plan_patch(ta.ApprovalPolicy.NEVER, GIT_WRITABLE, [ta.ChangedFile(".git/info/exclude", "add")],
                          workspace=workspace)
        assert plan.action == "run"
    apply_patch_to_workspace(add(".git/info/exclude"), home, protect_state=True)
    assert (home / ".git" / "info" / "exclude").read_text() == "x\n"
