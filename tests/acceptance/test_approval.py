"""Approvals through a live agent: each decision does what it says, a failing or silent
hook denies, a cancelled turn cancels its pending approval, a denied patch changes
nothing. Real commands in the real sandbox."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from .._os_facts import wait_no_processes_in
from ..conftest import EventLog, make_config, scripted, warm

APPROVE, SESSION, DENY, ABORT = (
    ta.ApprovalDecision.APPROVE, ta.ApprovalDecision.APPROVE_FOR_SESSION, ta.ApprovalDecision.DENY,
    ta.ApprovalDecision.ABORT,
)


class Hook:
    """An approval hook answering with ``decisions`` in order, recording every request."""

    def __init__(self, *decisions: ta.ApprovalDecision) -> None:
        self.decisions = list(decisions)
        self.requests: list[ta.ApprovalRequest] = []

    async def __call__(self, request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        self.requests.append(request)
        await trio.lowlevel.checkpoint()
        return self.decisions.pop(0)


def call(tool: str, argument: Any) -> str:
    """JS calling ``tools.<tool>`` and printing ``ok <result>`` or ``error <message>``."""
    shown = "`ok ${typeof r === 'string' ? r : r.exit_code + ':' + r.output}`"
    return (f"try {{ const r = await tools.{tool}({json.dumps(argument)}); text({shown}); }} "
            "catch (e) { text(`error ${e.message}`); }\n")


def command(cmd: str, **args: Any) -> str:
    return call("exec_command", {"cmd": cmd, "login": False, **args})


def text_of(output: Any) -> str:
    """What the script printed, one ``text()`` after another, joined by ``|``."""
    return output if isinstance(output, str) else "|".join(part.get("text", "") for part in output[1:])


async def one_exec(
    server: FakeResponsesServer, workspace: Path, source: str, hook: Any, **config: Any
) -> tuple[str, EventLog]:
    """One turn running ``source`` in ``exec`` under ``hook``; its output and the events."""
    seen: dict[str, str] = {}
    policy = config.pop("policy", ta.ApprovalPolicy.ON_REQUEST)
    timeout = config.pop("timeout", 60.0)

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        seen["output"] = text_of((await conn.next_request())["input"][0]["output"])
        await conn.send_final("resp-2")

    log = EventLog()
    approval = ta.Approvals(policy, hook=hook, timeout=timeout)
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(make_config(server, workspace, approval=approval, **config)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("go")).result()
    await wait_no_processes_in(workspace)
    return seen["output"], log


@pytest.fixture
def outside() -> Iterator[Path]:
    """A host directory outside the workspace and outside /tmp: only unsandboxed commands write it."""
    path = Path(tempfile.mkdtemp(prefix="trio-agent-outside-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def escalated(target: Path) -> str:
    return command(f"echo escalated >> {target}", sandbox_permissions="require_escalated",
                   justification="Write outside the workspace?")


# -- commands ----------------------------------------------------------------------------------


async def test_approve_runs_the_command_outside_the_sandbox_once(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    target = outside / "f"
    hook = Hook(APPROVE, APPROVE)
    output, log = await one_exec(server, workspace, escalated(target) * 2, hook)
    assert output == "ok 0:|ok 0:"
    assert target.read_text() == "escalated\nescalated\n"
    assert len(hook.requests) == 2  # approved once: the same command asks again
    first = hook.requests[0]
    assert first.kind is ta.ApprovalKind.COMMAND and first.outside_sandbox
    assert first.command == f"echo escalated >> {target}" and first.cwd == workspace
    assert first.reason == "Write outside the workspace?"
    assert first.call_id == "call-1/code-1" and first.turn_id == 1
    [requested, _] = log.payloads("approval.requested")
    assert requested == first.to_json()
    assert [e.turn_id for e in log.events if e.kind is ta.EventKind.APPROVAL_REQUESTED] == [1, 1]
    assert [r["decision"] for r in log.payloads("approval.resolved")] == ["approve", "approve"]


async def test_approve_for_the_session_does_not_ask_again(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    target = outside / "f"
    hook = Hook(SESSION)
    output, log = await one_exec(server, workspace, escalated(target) * 2, hook)
    assert output == "ok 0:|ok 0:"
    assert target.read_text() == "escalated\nescalated\n"
    assert len(hook.requests) == 1
    assert log.payloads("approval.resolved") == [
        {"approval_id": "approval-1", "call_id": "call-1/code-1", "decision": "approve_for_session", "source": "hook"}
    ]


async def test_deny_fails_the_call_and_the_turn_goes_on(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    target = outside / "f"
    output, log = await one_exec(server, workspace, escalated(target) + command("echo after"), Hook(DENY))
    assert output.startswith("error exec_command was denied: ")
    assert "did not run outside the sandbox; the user denied it" in output
    assert output.endswith("|ok 0:after\n")  # the script and the turn went on
    assert not target.exists()
    statuses = [r["status"] for r in log.payloads("tool.result") if r["tool"] == "exec_command"]
    assert statuses == ["failed", "completed"]
    assert log.payloads("run.completed")


async def test_abort_denies_and_cancels_the_turn(server: FakeResponsesServer, workspace: Path, outside: Path) -> None:
    target = outside / "f"
    hook = Hook(ABORT)

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-1", [frames.custom_tool_call("call-1", "exec", escalated(target))])
        second = await server.accept()
        await second.next_request()
        await second.send_final("resp-2")

    log = EventLog()
    approval = ta.Approvals(ta.ApprovalPolicy.ON_REQUEST, hook=hook)
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(make_config(server, workspace, approval=approval)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("go")
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
            await (await agent.prompt("next")).result()
    assert not target.exists()
    assert [r["decision"] for r in log.payloads("approval.resolved")] == ["abort"]
    assert [e.payload["status"] for e in log.events if e.kind.is_terminal] == ["cancelled", "completed"]


async def test_a_hook_that_raises_denies(server: FakeResponsesServer, workspace: Path, outside: Path) -> None:
    async def broken(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        raise RuntimeError("the approval UI is gone")

    output, log = await one_exec(server, workspace, escalated(outside / "f"), broken)
    assert "the approval hook failed (RuntimeError: the approval UI is gone)" in output
    assert not (outside / "f").exists()
    [resolved] = log.payloads("approval.resolved")
    assert resolved["decision"] == "deny" and resolved["source"] == "error"


async def test_a_hook_that_returns_something_else_denies(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    async def sloppy(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        return "yes"  # type: ignore[return-value]

    output, _ = await one_exec(server, workspace, escalated(outside / "f"), sloppy)
    assert "it returned 'yes', not a ta.ApprovalDecision" in output
    assert not (outside / "f").exists()


async def test_a_hook_that_hangs_is_bounded_and_denies(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    cancelled = trio.Event()

    async def silent(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    output, log = await one_exec(server, workspace, escalated(outside / "f"), silent, timeout=0.5)
    assert "nobody decided within 0.5 s" in output
    assert cancelled.is_set() and not (outside / "f").exists()
    [resolved] = log.payloads("approval.resolved")
    assert resolved["source"] == "timeout" and resolved["decision"] == "deny"


async def test_cancelling_the_turn_cancels_a_pending_approval(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    waiting, hook_cancelled = trio.Event(), trio.Event()

    async def human(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        waiting.set()
        try:
            await trio.sleep_forever()
        finally:
            hook_cancelled.set()
        raise AssertionError("unreachable")

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-1", [frames.custom_tool_call("call-1", "exec", escalated(outside / "f"))])
        second = await server.accept()
        await second.next_request()
        await second.send_final("resp-2")

    log = EventLog()
    approval = ta.Approvals(ta.ApprovalPolicy.ON_REQUEST, hook=human)
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(make_config(server, workspace, approval=approval)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("go")
            await waiting.wait()
            await turn.cancel()
            assert hook_cancelled.is_set()
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
            await (await agent.prompt("next")).result()
    assert not (outside / "f").exists()
    [resolved] = log.payloads("approval.resolved")
    assert resolved["decision"] == "deny" and resolved["source"] == "cancelled"


async def test_never_refuses_to_leave_the_sandbox_without_asking(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    output, log = await one_exec(server, workspace, escalated(outside / "f"), None, policy=ta.ApprovalPolicy.NEVER)
    assert "cannot run a command outside the sandbox: the approval policy is 'never'" in output
    assert "approval.requested" not in log.kinds()
    assert not (outside / "f").exists()


async def test_on_failure_asks_to_run_a_sandbox_denied_command_again_outside(
    server: FakeResponsesServer, workspace: Path
) -> None:
    hook = Hook(APPROVE)
    output, _ = await one_exec(
        server, workspace, command("echo x > made.txt"), hook,
        policy=ta.ApprovalPolicy.ON_FAILURE, sandbox=ta.SandboxMode.READ_ONLY,
    )
    assert output == "ok 0:"
    assert (workspace / "made.txt").read_text() == "x\n"
    [request] = hook.requests
    assert request.outside_sandbox and "Read-only file system" in request.reason
    assert "it failed in the sandbox (read-only, network off)" in request.reason


async def test_on_failure_denied_keeps_the_sandboxed_output(server: FakeResponsesServer, workspace: Path) -> None:
    output, _ = await one_exec(
        server, workspace, command("echo x > made.txt"), Hook(DENY),
        policy=ta.ApprovalPolicy.ON_FAILURE, sandbox=ta.SandboxMode.READ_ONLY,
    )
    assert output.startswith("error exec_command was denied")
    assert "Output of the run in the sandbox (exit code 1):" in output and "Read-only file system" in output
    assert not (workspace / "made.txt").exists()


async def test_untrusted_asks_before_anything_but_known_read_only_commands(
    server: FakeResponsesServer, workspace: Path
) -> None:
    hook = Hook(APPROVE)
    source = command("ls -a | wc -l") + command("touch made.txt")
    output, _ = await one_exec(server, workspace, source, hook, policy=ta.ApprovalPolicy.UNTRUSTED)
    assert output == "ok 0:2\n|ok 0:"
    assert [r.command for r in hook.requests] == ["touch made.txt"]
    assert not hook.requests[0].outside_sandbox  # approved, it still runs in the sandbox
    assert (workspace / "made.txt").exists()


# -- patches -----------------------------------------------------------------------------------

PATCH = (
    "*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** Add File: b.txt\n+added\n"
    "*** Delete File: c.txt\n*** End Patch"
)


def files(workspace: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(workspace.iterdir())}


async def test_a_denied_patch_leaves_the_files_untouched(server: FakeResponsesServer, workspace: Path) -> None:
    (workspace / "a.txt").write_text("old\n")
    (workspace / "c.txt").write_text("doomed\n")
    before = files(workspace)
    hook = Hook(DENY)
    output, log = await one_exec(server, workspace, call("apply_patch", PATCH), hook, sandbox=ta.SandboxMode.READ_ONLY)
    assert output.startswith("error apply_patch was denied: no file was changed; the user denied it")
    assert files(workspace) == before
    [request] = hook.requests
    assert request.kind is ta.ApprovalKind.FILE_CHANGE and request.reason == "the sandbox is read-only"
    assert request.changes == (
        ta.ChangedFile("a.txt", "update"), ta.ChangedFile("b.txt", "add"), ta.ChangedFile("c.txt", "delete"),
    )
    assert request.command is None and request.cwd == workspace
    [result] = [r for r in log.payloads("tool.result") if r["tool"] == "apply_patch"]
    assert result["status"] == "failed"


async def test_an_approved_patch_applies_and_for_the_session_covers_the_same_files(
    server: FakeResponsesServer, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("old\n")
    (workspace / "c.txt").write_text("doomed\n")
    again = "*** Begin Patch\n*** Update File: b.txt\n@@\n-added\n+changed\n*** End Patch"
    elsewhere = "*** Begin Patch\n*** Add File: d.txt\n+d\n*** End Patch"
    hook = Hook(SESSION, DENY)
    source = call("apply_patch", PATCH) + call("apply_patch", again) + call("apply_patch", elsewhere)
    output, _ = await one_exec(server, workspace, source, hook, sandbox=ta.SandboxMode.READ_ONLY)
    assert output.count("ok Success.") == 2 and "error apply_patch was denied" in output
    assert files(workspace) == {"a.txt": "new\n", "b.txt": "changed\n"}
    assert [[c.path for c in r.changes] for r in hook.requests] == [["a.txt", "b.txt", "c.txt"], ["d.txt"]]


async def test_a_patch_writing_git_needs_approval_in_workspace_write(
    server: FakeResponsesServer, workspace: Path
) -> None:
    (workspace / ".git").mkdir()
    patch = "*** Begin Patch\n*** Add File: .git/info/exclude\n+x\n*** Add File: ok.txt\n+y\n*** End Patch"
    hook = Hook(DENY)
    output, _ = await one_exec(server, workspace, call("apply_patch", patch), hook)
    assert "apply_patch was denied" in output
    assert hook.requests[0].reason == "it writes .git/info/exclude, and the sandbox keeps .git read-only"
    assert not (workspace / "ok.txt").exists() and not (workspace / ".git" / "info").exists()


async def test_a_request_from_a_cell_running_on_is_withdrawn_when_its_turn_ends(
    server: FakeResponsesServer, workspace: Path, outside: Path
) -> None:
    waiting, hook_cancelled = trio.Event(), trio.Event()

    async def human(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
        waiting.set()
        try:
            await trio.sleep_forever()
        finally:
            hook_cancelled.set()
        raise AssertionError("unreachable")

    source = "yield_control();\n" + escalated(outside / "f")

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        output = (await conn.next_request())["input"][0]["output"]
        shown = output if isinstance(output, str) else output[0]["text"]
        assert shown.startswith("Script running with cell ID 1")  # it runs on
        await waiting.wait()  # its exec_command waits for approval...
        await conn.send_final("resp-2")  # ...when the turn ends

    log = EventLog()
    approval = ta.Approvals(ta.ApprovalPolicy.ON_REQUEST, hook=human)
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(make_config(server, workspace, approval=approval)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("go")).result()
            await log.wait_for(lambda e: e.kind is ta.EventKind.APPROVAL_RESOLVED)
            assert hook_cancelled.is_set()
    assert not (outside / "f").exists()
    [resolved] = log.payloads("approval.resolved")
    assert resolved["decision"] == "deny" and resolved["source"] == "withdrawn"
