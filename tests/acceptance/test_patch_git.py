"""A live agent's apply_patch cannot write .git through a symlink (issue 21, hole 5).

After ``ln -s .git g``, ``*** Update File: g/config`` used to edit ``.git/config``
(``fsmonitor = ...``: code execution on the next git command) under ``never``, and under
``on-request`` without asking. Through the real ExecGuard, in ``workspace-write``: it is
refused under ``never``, asked under ``on-request`` (denied: unchanged; approved:
written), and allowed with ``writable_git`` (positive control), like a normal file next
to it. A swap while the approval is pending, or after an approval for the session, cannot
turn an approved ordinary write into a ``.git`` write."""

from __future__ import annotations

from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from .test_approval import APPROVE, DENY, SESSION, Hook, call, command, one_exec

CONFIG = "[core]\n\tbare = false\n"
EVIL = (
    "*** Begin Patch\n*** Update File: g/config\n@@\n [core]\n+\tfsmonitor = ./evil\n*** End Patch"
)
NORMAL = "*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch"
WRITE = ta.SandboxMode.WORKSPACE_WRITE
REASON = "it writes g/config (it resolves to .git/config), and the sandbox keeps .git read-only"


@pytest.fixture
def repo(workspace: Path) -> Path:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text(CONFIG)
    (workspace / "g").symlink_to(".git")
    (workspace / "a.txt").write_text("old\n")
    return workspace


def git_config(repo: Path) -> str:
    return (repo / ".git" / "config").read_text()


async def test_never_refuses_a_git_write_through_a_link_and_allows_the_file_next_to_it(
    server: FakeResponsesServer, repo: Path
) -> None:
    hook = Hook()
    source = call("apply_patch", EVIL) + call("apply_patch", NORMAL)
    output, _ = await one_exec(server, repo, source, hook, policy=ta.ApprovalPolicy.NEVER, sandbox=WRITE)
    refused, applied = output.split("|")
    assert refused.startswith(f"error apply_patch was refused: {REASON}, and the approval policy is 'never'")
    assert applied == "ok Success. Updated the following files:\nM a.txt\n"
    assert git_config(repo) == CONFIG and (repo / "a.txt").read_text() == "new\n"
    assert hook.requests == []


@pytest.mark.parametrize(("decision", "written"), [(DENY, False), (APPROVE, True)])
async def test_on_request_asks_before_a_git_write_through_a_link(
    server: FakeResponsesServer, repo: Path, decision: ta.ApprovalDecision, written: bool
) -> None:
    hook = Hook(decision)
    output, _ = await one_exec(server, repo, call("apply_patch", EVIL), hook, sandbox=WRITE)
    [request] = hook.requests
    assert request.reason == REASON and request.changes == (ta.ChangedFile("g/config", "update"),)
    assert output.startswith("ok Success." if written else "error apply_patch was denied: no file was changed")
    assert ("fsmonitor = ./evil" in git_config(repo)) is written


async def test_writable_git_lets_it_through_without_asking(server: FakeResponsesServer, repo: Path) -> None:
    hook = Hook()
    output, _ = await one_exec(server, repo, call("apply_patch", EVIL), hook, policy=ta.ApprovalPolicy.NEVER,
                               sandbox=ta.Sandbox(writable_git=True))
    assert output.startswith("ok Success.") and "fsmonitor = ./evil" in git_config(repo)
    assert hook.requests == []


def swap_to_git(repo: Path) -> None:
    (repo / "g").rename(repo / "g.parked")
    (repo / "g").symlink_to(".git")


@pytest.fixture
def plain_g(repo: Path) -> Path:
    """``g`` a normal directory holding a ``config`` (to be swapped for ``g -> .git``)."""
    (repo / "g").unlink()
    (repo / "g").mkdir()
    (repo / "g" / "config").write_text(CONFIG)
    return repo


async def test_a_swap_while_the_approval_is_pending_cannot_reach_git(
    server: FakeResponsesServer, plain_g: Path
) -> None:
    """read-only: the user is asked to approve writing g/config, an ordinary file; while
    they decide, g becomes a link to .git. The approval does not cover .git."""
    repo = plain_g

    async def human(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        assert request.reason == "the sandbox is read-only"
        swap_to_git(repo)
        return APPROVE

    output, _ = await one_exec(server, repo, call("apply_patch", EVIL), human, sandbox=ta.SandboxMode.READ_ONLY)
    assert output.startswith("error Refusing to write g/config (it resolves to .git/config): the sandbox keeps "
                             ".git read-only, and this patch was not approved to change it. No file was changed.")
    assert git_config(repo) == CONFIG


async def test_an_approval_for_the_session_does_not_cover_git_after_a_swap(
    server: FakeResponsesServer, plain_g: Path
) -> None:
    """Approved for the session as an ordinary file; the same patch after ``g -> .git``
    is asked again, now naming .git (denied here)."""
    repo = plain_g
    hook = Hook(SESSION, APPROVE, DENY)
    swap = command("mv g g.parked && ln -s .git g", sandbox_permissions="require_escalated", justification="swap")
    source = call("apply_patch", EVIL) + swap + call("apply_patch", EVIL)
    output, _ = await one_exec(server, repo, source, hook, sandbox=ta.SandboxMode.READ_ONLY)
    first, swapped, second = output.split("|")
    assert first.startswith("ok Success.") and swapped == "ok 0:"
    assert "fsmonitor" in (repo / "g.parked" / "config").read_text()
    assert second.startswith("error apply_patch was denied")
    assert [r.reason for r in hook.requests] == [
        "the sandbox is read-only", "swap",
        "the sandbox is read-only, and it writes g/config (it resolves to .git/config)",
    ]
    assert git_config(repo) == CONFIG
