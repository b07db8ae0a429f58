"""The ``untrusted`` policy through a live agent (issue 21, hole 6): the issue's three
"read-only" commands that run a program or write a file are asked about, and when
denied do nothing; a real read-only command runs without asking. Real commands in the
real sandbox (workspace-write, so that each attack would succeed if it ran)."""

from __future__ import annotations

from pathlib import Path

import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from .test_approval import DENY, Hook, command, one_exec

ATTACKS = [
    "git grep -O'touch ran-pager' needle",  # git grep runs `touch ran-pager notes.txt`
    "sort -S 1K --compress-program=./compress big.txt",  # sort runs ./compress on its spilled temporaries
    "uniq /dev/null victim.txt",  # uniq's second operand is its output file
]


async def a_repository(workspace: Path) -> None:
    """A git repository tracking notes.txt (which holds ``needle``), with a big file for
    sort to spill, a compress program that leaves a marker, and a file to truncate."""
    (workspace / "notes.txt").write_text("needle\n")
    (workspace / "big.txt").write_text("".join(f"{n}\n" for n in range(100_000, 0, -1)))
    (workspace / "victim.txt").write_text("precious\n")
    compress = workspace / "compress"
    compress.write_text("#!/bin/sh\ntouch ran-compress-program\nexec cat\n")
    compress.chmod(0o755)
    await trio.run_process(["git", "init", "-q"], cwd=workspace)
    await trio.run_process(["git", "add", "notes.txt"], cwd=workspace)


async def test_the_issues_commands_are_asked_about_and_a_read_only_one_is_not(
    server: FakeResponsesServer, workspace: Path
) -> None:
    await a_repository(workspace)
    hook = Hook(DENY, DENY, DENY)
    source = "".join(command(cmd) for cmd in ATTACKS) + command("git status --short")
    output, _ = await one_exec(
        server, workspace, source, hook, policy=ta.ApprovalPolicy.UNTRUSTED, sandbox=ta.SandboxMode.WORKSPACE_WRITE
    )
    assert [request.command for request in hook.requests] == ATTACKS
    assert all("not a known read-only command" in request.reason for request in hook.requests)
    *denied, status = output.split("|")
    assert all(result.startswith("error exec_command was denied") for result in denied), output
    assert status.startswith("ok 0:A  notes.txt\n"), output  # it ran, unasked
    assert not (workspace / "ran-pager").exists()
    assert not (workspace / "ran-compress-program").exists()
    assert (workspace / "victim.txt").read_text() == "precious\n"
