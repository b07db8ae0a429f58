"""``Agent.set_permissions``: another sandbox and approval policy for a live agent (the
app server's ``turn/start`` ``sandboxPolicy``/``approvalPolicy``). Commands started
afterwards run in the new sandbox, the next turn begins with a new permissions
message (and only when they changed), and an explicit mode that cannot work here is
refused with nothing changed. Real commands in the real sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._session.context import permissions_message
from trio_agent.testing import FakeResponsesServer

from .._os_facts import wait_no_processes_in
from ..conftest import make_config, scripted, warm
from .test_approval import command, text_of


def developer_texts(request: dict[str, Any]) -> list[str]:
    return [part["text"] for item in request["input"] if item.get("role") == "developer"
            for part in item.get("content", [])]


async def test_a_stricter_sandbox_applies_to_the_next_commands_and_the_model_is_told(
    server: FakeResponsesServer, workspace: Path
) -> None:
    outputs: list[str] = []
    requests: list[dict[str, Any]] = []
    write = command("echo hi > note.txt && echo wrote")

    async def script() -> None:
        conn = await warm(server)
        for turn in range(3):
            requests.append(await conn.next_request())
            await conn.send_tool_call(f"resp-{turn}a", f"call-{turn}", "exec", write)
            outputs.append(text_of((await conn.next_request())["input"][0]["output"]))
            await conn.send_final(f"resp-{turn}b")

    config = make_config(server, workspace, sandbox=ta.SandboxMode.DANGER_FULL_ACCESS)
    async with scripted(script, 30), ta.open_agent(config) as agent:
        await (await agent.prompt("first")).result()
        await agent.set_permissions(sandbox=ta.SandboxMode.READ_ONLY, approval=ta.ApprovalPolicy.NEVER)
        assert agent.sandbox is ta.SandboxMode.READ_ONLY and agent.sandbox_settings.network is False
        await (await agent.prompt("second")).result()
        await agent.set_permissions(sandbox=ta.SandboxMode.READ_ONLY, approval=ta.ApprovalPolicy.NEVER)
        await (await agent.prompt("third")).result()
    await wait_no_processes_in(workspace)
    assert outputs[0] == "ok 0:wrote\n"
    assert outputs[1].startswith("ok 1:") and "Read-only file system" in outputs[1]  # the write failed
    assert any("`danger-full-access`" in text for text in developer_texts(requests[0]))
    # The second turn's request (incremental) starts by telling the model its new sandbox...
    told, prompt = requests[1]["input"]
    assert told["role"] == "developer" and "`read-only`" in told["content"][0]["text"]
    assert prompt["content"] == [{"type": "input_text", "text": "second"}]
    # ...and the third, whose permissions did not change, carries its prompt alone.
    assert [item["content"][0]["text"] for item in requests[2]["input"]] == ["third"]

async def test_an_explicit_mode_that_cannot_work_here_changes_nothing(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warmed = trio.Event()

    async def script() -> None:
        await warm(server)
        warmed.set()

    config = make_config(server, workspace, sandbox=ta.SandboxMode.DANGER_FULL_ACCESS)
    async with scripted(script, 30), ta.open_agent(config) as agent:
        await warmed.wait()
        monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it any more
        with pytest.raises(ta.SandboxUnavailable, match="workspace-write"):
            await agent.set_permissions(sandbox=ta.SandboxMode.WORKSPACE_WRITE, approval=ta.ApprovalPolicy.NEVER)
        assert agent.sandbox is ta.SandboxMode.DANGER_FULL_ACCESS
        with pytest.warns(RuntimeWarning, match="without a sandbox"):
            await agent.set_permissions(sandbox=None, approval=ta.ApprovalPolicy.NEVER)  # the default falls back
        assert agent.sandbox is ta.SandboxMode.DANGER_FULL_ACCESS


async def test_permissions_changed_before_the_first_turn_are_in_its_context(
    server: FakeResponsesServer, workspace: Path
) -> None:
    # The first turn's context is gathered when the agent opens; a change since then is
    # what the first request states, in its one permissions message.
    requests: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        requests.append(await conn.next_request())
        await conn.send_final("resp-1")

    config = make_config(server, workspace, sandbox=ta.SandboxMode.DANGER_FULL_ACCESS)
    async with scripted(script, 30), ta.open_agent(config) as agent:
        await trio.lowlevel.checkpoint()  # the runner has started: the context is gathered
        before = developer_texts({"input": [permissions_message("danger-full-access", "never")]})
        await agent.set_permissions(sandbox=ta.SandboxMode.DANGER_FULL_ACCESS,
                                    approval=ta.Approvals(ta.ApprovalPolicy.UNTRUSTED, hook=decline))
        await (await agent.prompt("first")).result()
    [told] = developer_texts(requests[0])
    assert told == developer_texts({"input": [permissions_message("danger-full-access", "untrusted")]})[0]
    assert [told] != before


async def decline(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
    return ta.ApprovalDecision.DENY
