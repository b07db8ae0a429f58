"""Approvals and sandboxes over the protocol (issue 14 item 5; docs/app-server.md).

A served thread's approval hook is its clients: a command asks with
``item/commandExecution/requestApproval``, a patch with ``item/fileChange/requestApproval``
after its ``fileChange`` item started; each decision does what it says; an error
reply, no subscriber or a vanished client denies; an approval cut short (timeout,
interrupt) is ``serverRequest/resolved``; while one is pending the thread is
``active`` with ``waitingOnApproval``. ``sandbox``/``sandboxPolicy``/``approvalPolicy``
map to the runtime's and the responses report what the thread really runs. Real
commands in the real sandbox, so Trio's real clock, each test bounded. Every message
is checked against the schema (the harness client validates).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._serve import open_app_server
from trio_agent.testing import AppServerClient, AppServerError, FakeConnection, ServerRequest, frames

from .._os_facts import wait_no_processes_in
from ._harness import Harness, Json, app_server, send_message, start_thread, text_input

LIMIT = 30  # seconds of real time for any one test's turns


def command(cmd: str) -> str:
    """JS running ``cmd`` and printing ``ok <exit>:<output>`` or ``error <message>``."""
    args = json.dumps({"cmd": cmd, "login": False})
    return (f"try {{ const r = await tools.exec_command({args}); text(`ok ${{r.exit_code}}:${{r.output}}`); }} "
            "catch (e) { text(`error ${e.message}`); }\n")


def patch(text: str) -> str:
    return (f"try {{ text(`ok ${{await tools.apply_patch({json.dumps(text)})}}`); }} "
            "catch (e) { text(`error ${e.message}`); }\n")


class Model:
    """Each turn: one ``exec`` cell running ``source``, then a final answer; the outputs
    the cell gave back to the model."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.outputs: list[str] = []
        self.turns = 0

    async def __call__(self, conn: FakeConnection, request: Json) -> None:
        outputs = [item for item in request["input"] if item.get("type") == "custom_tool_call_output"]
        if request["input"][-1].get("type") != "custom_tool_call_output":  # a new prompt (maybe a full replay)
            self.turns += 1
            call = frames.custom_tool_call(f"call-{self.turns}", "exec", self.source)
            await conn.send(frames.output_item_done(0, call))
            await conn.send(frames.completed(f"resp-{self.turns}a", [call]))
            return
        self.outputs.append("|".join(part.get("text", "") for part in outputs[-1]["output"][1:]))
        await send_message(conn, f"resp-{self.turns}b", "done")


@asynccontextmanager
async def served(tmp_path: Path, model: Model, **kw: Any) -> AsyncIterator[tuple[Harness, AppServerClient]]:
    async with app_server(tmp_path, model, **kw) as harness:
        client = await harness.client()
        with trio.fail_after(LIMIT):
            yield harness, client
    await wait_no_processes_in(tmp_path / "workspace")


async def start_turn(client: AppServerClient, thread_id: str, **params: Any) -> str:
    started = await client.request("turn/start", {"threadId": thread_id, "input": text_input("go"), **params})
    return str(started["turn"]["id"])


async def approval_request(client: AppServerClient, method: str) -> tuple[ServerRequest, list[Json]]:
    """The next approval request, and the messages that arrived before it."""
    request = await client.read_server_request(method)
    return request, client.take_pending()


async def asked(client: AppServerClient, method: str = "item/commandExecution/requestApproval"
                ) -> tuple[str, str, ServerRequest]:
    """An ``untrusted`` thread whose first turn asks: its id, the turn's, the request."""
    thread_id = (await start_thread(client, approvalPolicy="untrusted"))["id"]
    turn_id = await start_turn(client, thread_id)
    request, _ = await approval_request(client, method)
    return thread_id, turn_id, request


def status_flags(messages: list[Json], thread_id: str) -> list[list[str] | None]:
    return [m["params"]["status"].get("activeFlags") for m in messages
            if m.get("method") == "thread/status/changed" and m["params"]["threadId"] == thread_id]


def completed_item(messages: list[Json], item_id: str) -> Json:
    return next(m["params"]["item"] for m in messages
                if m.get("method") == "item/completed" and m["params"]["item"]["id"] == item_id)


async def finish(client: AppServerClient, turn_id: str) -> tuple[Json, list[Json]]:
    done = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)
    return done, client.take_pending()


# -- commands ----------------------------------------------------------------------------------


async def test_an_accepted_command_runs_after_its_item_and_the_waiting_status(tmp_path: Path) -> None:
    model = Model(command("touch made.txt && echo made"))
    async with served(tmp_path, model) as (harness, client):
        started = await client.request("thread/start", {"approvalPolicy": "untrusted", "sandbox": "workspace-write"})
        assert started["approvalPolicy"] == "untrusted"
        assert started["sandbox"] == {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False,
                                      "excludeTmpdirEnvVar": False, "excludeSlashTmp": False}
        thread_id = started["thread"]["id"]
        turn_id = await start_turn(client, thread_id)
        request, before = await approval_request(client, "item/commandExecution/requestApproval")
        # One item for the command (none for the exec cell that runs it), named by the request.
        (item,) = [m["params"]["item"] for m in before if m.get("method") == "item/started"
                   and m["params"]["item"]["type"] == "commandExecution"]
        assert item["id"] == "call-1/code-1" and item["status"] == "inProgress"
        assert item["commandActions"] == [{"type": "unknown", "command": "touch made.txt && echo made"}]
        assert item["command"].endswith(" -c 'touch made.txt && echo made'")  # the shell's command line
        assert status_flags(before, thread_id)[-1] == ["waitingOnApproval"]  # before the request
        params = request.params
        assert params["threadId"] == thread_id and params["turnId"] == turn_id and params["itemId"] == item["id"]
        assert params["command"] == item["command"] and params["commandActions"] == item["commandActions"]
        assert params["cwd"] == str(harness.workspace.resolve())
        assert params["approvalId"] and "untrusted" in params["reason"] and isinstance(params["startedAtMs"], int)
        assert not (harness.workspace / "made.txt").exists()  # nothing ran before the decision
        await client.respond(request.id, {"decision": "accept"})
        done, after = await finish(client, turn_id)
    assert done["turn"]["status"] == "completed"
    assert (harness.workspace / "made.txt").exists() and model.outputs == ["ok 0:made\n"]
    assert status_flags(after, thread_id)[:2] == [[], None]  # no longer waiting, then idle
    assert completed_item(after, "call-1/code-1")["status"] == "completed"


@pytest.mark.parametrize(("answer", "turn_status"), [
    pytest.param({"decision": "decline"}, "completed", id="decline"),
    pytest.param({"decision": "cancel"}, "interrupted", id="cancel"),
])
async def test_a_refused_command_does_not_run(tmp_path: Path, answer: Json, turn_status: str) -> None:
    model = Model(command("touch refused.txt"))
    async with served(tmp_path, model) as (harness, client):
        _thread_id, turn_id, request = await asked(client)
        await client.respond(request.id, answer)
        done, after = await finish(client, turn_id)
    assert done["turn"]["status"] == turn_status
    assert not (harness.workspace / "refused.txt").exists()
    if turn_status == "completed":  # declined: the model is told and the turn goes on
        assert model.outputs[0].startswith("error exec_command was denied") and "the user denied it" in model.outputs[0]
        assert completed_item(after, "call-1/code-1")["status"] == "declined"


@pytest.mark.parametrize("answer", [
    pytest.param({"decision": "acceptForSession"}, id="acceptForSession"),
    pytest.param({"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}}},
                 id="acceptWithExecpolicyAmendment"),
])
async def test_accept_for_the_session_asks_once_for_the_same_command(tmp_path: Path, answer: Json) -> None:
    model = Model(command("touch again.txt") * 2)
    async with served(tmp_path, model) as (_harness, client):
        _thread_id, turn_id, request = await asked(client)
        await client.respond(request.id, answer)
        await finish(client, turn_id)
    assert model.outputs == ["ok 0:|ok 0:"]  # the second ran without asking (no second request arrived)


@pytest.mark.parametrize(("action", "first"), [
    pytest.param("allow", "ok 0:", id="allow"),
    pytest.param("deny", "error exec_command was denied", id="deny"),
])
async def test_a_turns_approval_policy_asks_and_a_network_rule_decides_only_that_call(
    tmp_path: Path, action: str, first: str
) -> None:
    model = Model(command("touch net.txt") * 2)
    async with served(tmp_path, model) as (harness, client):
        started = await client.request("thread/start", {})
        assert started["approvalPolicy"] == "never"
        thread_id = started["thread"]["id"]
        turn_id = await start_turn(client, thread_id, approvalPolicy="untrusted")  # from this turn on
        request, _ = await approval_request(client, "item/commandExecution/requestApproval")
        rule = {"network_policy_amendment": {"host": "example.com", "action": action}}
        await client.respond(request.id, {"decision": {"applyNetworkPolicyAmendment": rule}})
        second, before = await approval_request(client, "item/commandExecution/requestApproval")  # asked again
        await client.respond(second.id, {"decision": "decline"})
        await finish(client, turn_id)
        resumed = await client.request("thread/resume", {"threadId": thread_id})
    assert resumed["approvalPolicy"] == "untrusted"
    ran, refused = model.outputs[0].split("|")
    assert ran.startswith(first) and refused.startswith("error exec_command was denied")
    assert (harness.workspace / "net.txt").exists() is (action == "allow")
    assert completed_item(before, "call-1/code-1")["status"] == ("completed" if action == "allow" else "declined")


@pytest.mark.parametrize(("how", "why"), [
    pytest.param("error", "the approval hook failed", id="error-reply"),
    pytest.param("nonsense", "is not a decision", id="malformed-reply"),
])
async def test_an_error_or_a_malformed_reply_denies(tmp_path: Path, how: str, why: str) -> None:
    model = Model(command("touch nope.txt"))
    async with served(tmp_path, model) as (harness, client):
        _thread_id, turn_id, request = await asked(client)
        if how == "error":
            await client.respond_error(request.id, -32000, "the user closed the dialog")
        else:
            await client.respond(request.id, {"decision": "maybe"})
        done, after = await finish(client, turn_id)
    assert done["turn"]["status"] == "completed" and not (harness.workspace / "nope.txt").exists()
    assert completed_item(after, "call-1/code-1")["status"] == "declined"
    assert model.outputs[0].startswith("error exec_command was denied") and why in model.outputs[0]


async def test_the_first_answer_wins_and_the_other_clients_are_told_it_is_resolved(tmp_path: Path) -> None:
    model = Model(command("touch shared.txt"))
    async with served(tmp_path, model) as (harness, client):
        other = await harness.client()
        thread_id = (await start_thread(client, approvalPolicy="untrusted"))["id"]
        await other.request("thread/resume", {"threadId": thread_id})
        turn_id = await start_turn(client, thread_id)
        mine, _ = await approval_request(client, "item/commandExecution/requestApproval")
        theirs = await other.read_server_request("item/commandExecution/requestApproval")
        assert theirs.params == mine.params
        await other.respond(theirs.id, {"decision": "accept"})
        resolved = await client.read_notification("serverRequest/resolved")
        assert resolved == {"threadId": thread_id, "requestId": mine.id}
        await client.respond(mine.id, {"decision": "decline"})  # too late: ignored
        await finish(client, turn_id)
    assert (harness.workspace / "shared.txt").exists()


async def test_an_interrupted_turn_withdraws_its_pending_approval(tmp_path: Path) -> None:
    model = Model(command("touch never.txt"))
    async with served(tmp_path, model) as (harness, client):
        thread_id, turn_id, request = await asked(client)
        assert await client.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
        resolved = await client.read_notification("serverRequest/resolved")
        assert resolved == {"threadId": thread_id, "requestId": request.id}
        done, _ = await finish(client, turn_id)
        await client.respond(request.id, {"decision": "accept"})  # too late: ignored
        read = await client.request("thread/read", {"threadId": thread_id})
    assert done["turn"]["status"] == "interrupted" and not (harness.workspace / "never.txt").exists()
    assert read["thread"]["status"] == {"type": "idle"}


async def test_an_approval_nobody_answers_in_time_is_resolved_and_denied(tmp_path: Path) -> None:
    model = Model(command("touch late.txt"))
    approval = ta.Approvals(ta.ApprovalPolicy.NEVER, timeout=0.5)  # the server's template: 0.5 s to decide
    async with served(tmp_path, model, approval=approval) as (harness, client):
        thread_id, turn_id, request = await asked(client)
        resolved = await client.read_notification("serverRequest/resolved")
        assert resolved == {"threadId": thread_id, "requestId": request.id}
        done, after = await finish(client, turn_id)
    assert done["turn"]["status"] == "completed" and not (harness.workspace / "late.txt").exists()
    assert completed_item(after, "call-1/code-1")["status"] == "declined"
    assert "nobody decided within 0.5 s" in model.outputs[0]


async def test_with_no_subscriber_or_a_client_that_went_away_the_command_is_denied(tmp_path: Path) -> None:
    model = Model(command("touch orphan.txt") * 2)
    async with served(tmp_path, model) as (harness, client):
        leaver = await harness.client()
        thread_id = (await start_thread(leaver, approvalPolicy="untrusted"))["id"]
        turn_id = await start_turn(leaver, thread_id)
        await leaver.read_server_request("item/commandExecution/requestApproval")
        await leaver.aclose()  # goes away with the request unanswered; nobody else is subscribed
        await client.read_notification("thread/status/changed", lambda p: p["status"]["type"] == "idle")
    assert not (harness.workspace / "orphan.txt").exists()
    first, second = model.outputs[0].split("|")
    assert "went away before answering" in first
    assert "no client is subscribed" in second
    assert turn_id


# -- patches -----------------------------------------------------------------------------------

PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi there\n*** End Patch"


@pytest.mark.parametrize(("decision", "created", "status"), [
    pytest.param("accept", True, "completed", id="accept"),
    pytest.param("decline", False, "declined", id="decline"),
])
async def test_a_patch_shows_its_file_change_then_asks(tmp_path: Path, decision: str, created: bool,
                                                       status: str) -> None:
    model = Model(patch(PATCH))
    async with served(tmp_path, model) as (harness, client):
        thread_id = (await start_thread(client, approvalPolicy="untrusted"))["id"]
        turn_id = await start_turn(client, thread_id)
        request, before = await approval_request(client, "item/fileChange/requestApproval")
        (item,) = [m["params"]["item"] for m in before if m.get("method") == "item/started"
                   and m["params"]["item"]["type"] == "fileChange"]
        assert item == {"type": "fileChange", "id": "call-1/code-1", "status": "inProgress",
                        "changes": [{"path": "hello.txt", "kind": {"type": "add"}, "diff": "hi there\n"}],
                        "startedAtMs": item["startedAtMs"], "completedAtMs": None}
        assert request.params == {"threadId": thread_id, "turnId": turn_id, "itemId": item["id"],
                                  "reason": request.params["reason"], "startedAtMs": request.params["startedAtMs"],
                                  "grantRoot": None}
        await client.respond(request.id, {"decision": decision})
        _, after = await finish(client, turn_id)
    assert (harness.workspace / "hello.txt").exists() is created
    assert completed_item(after, item["id"])["status"] == status


async def test_a_patch_answered_with_a_command_only_decision_is_denied(tmp_path: Path) -> None:
    model = Model(patch(PATCH))
    async with served(tmp_path, model) as (harness, client):
        thread_id = (await start_thread(client, approvalPolicy="untrusted"))["id"]
        turn_id = await start_turn(client, thread_id)
        request, _ = await approval_request(client, "item/fileChange/requestApproval")
        await client.respond(request.id, {"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": []}}})
        done, after = await finish(client, turn_id)
    assert done["turn"]["status"] == "completed" and not (harness.workspace / "hello.txt").exists()
    assert "is not a decision (accept, acceptForSession, decline, cancel)" in model.outputs[0]
    assert completed_item(after, "call-1/code-1")["status"] == "declined"


async def test_an_update_patch_carries_its_diff_and_move(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "a.txt").write_text("one\ntwo\n")
    text = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n one\n-two\n+2\n*** End Patch"
    model = Model(patch(text))
    async with served(tmp_path, model) as (harness, client):
        thread_id = (await start_thread(client))["id"]  # policy never: no request, the item is shown anyway
        turn_id = await start_turn(client, thread_id)
        _, seen = await finish(client, turn_id)
    change = completed_item(seen, "call-1/code-1")
    assert change["status"] == "completed"
    assert change["changes"] == [{"path": "a.txt", "kind": {"type": "update", "move_path": "b.txt"},
                                  "diff": "@@\n one\n-two\n+2\n"}]
    assert (harness.workspace / "b.txt").read_text() == "one\n2\n"


# -- sandboxes ---------------------------------------------------------------------------------


async def test_a_turns_sandbox_policy_applies_from_that_turn_on_and_survives_a_cold_resume(tmp_path: Path) -> None:
    model = Model(command("touch w.txt && echo wrote"))
    async with served(tmp_path, model, unload_delay=0) as (harness, client):
        started = await client.request("thread/start", {})
        assert started["sandbox"] == {"type": "dangerFullAccess"} and started["approvalPolicy"] == "never"
        thread_id = started["thread"]["id"]
        await finish(client, await start_turn(client, thread_id, sandboxPolicy={"type": "readOnly"}))
        resumed = await client.request("thread/resume", {"threadId": thread_id})  # warm: reports what runs now
        assert resumed["sandbox"] == {"type": "readOnly", "networkAccess": False}
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed")
        cold = await client.request("thread/resume", {"threadId": thread_id})
        assert cold["sandbox"] == {"type": "readOnly", "networkAccess": False}
        await finish(client, await start_turn(client, thread_id, sandboxPolicy={
            "type": "workspaceWrite", "networkAccess": True, "writableRoots": [str(tmp_path)]}))
        again = await client.request("thread/resume", {"threadId": thread_id})
        assert again["sandbox"]["writableRoots"] == [str(tmp_path)] and again["sandbox"]["networkAccess"] is True
    assert model.outputs[0].startswith("ok 1:") and "Read-only file system" in model.outputs[0]
    assert model.outputs[1] == "ok 0:wrote\n"
    # The model was told each change, before the prompt of the turn it applies from.
    replay = harness.model.requests[2]["input"]  # the second turn after the cold resume: a full replay
    told = [part["text"] for item in replay if item.get("role") == "developer" and item.get("type") == "message"
            for part in item["content"] if "sandbox_mode" in part["text"]]
    # (The first turn's context already said read-only: it was set before that turn began.)
    assert len(told) == 2 and "`read-only`" in told[0] and "`workspace-write`" in told[1]
    assert replay[-2]["role"] == "developer" and replay[-1]["content"][0]["text"] == "go"


async def test_the_default_is_a_workspace_sandbox_asking_nobody(tmp_path: Path) -> None:
    model = Model(command("touch made.txt && echo made"))
    async with served(tmp_path, model, sandbox=None) as (harness, client):  # trio-agent serve's configuration
        started = await client.request("thread/start", {"approvalsReviewer": "auto_review"})
        assert started["sandbox"] == {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False,
                                      "excludeTmpdirEnvVar": False, "excludeSlashTmp": False}
        # The reviewer asked for is the one reported (and kept); policy never asks nobody anyway.
        assert started["approvalPolicy"] == "never" and started["approvalsReviewer"] == "auto_review"
        _, seen = await finish(client, await start_turn(client, started["thread"]["id"]))
    assert model.outputs == ["ok 0:made\n"] and (harness.workspace / "made.txt").exists()
    assert not [m for m in seen if "id" in m and "method" in m]  # no server request: nobody was asked


async def test_resume_and_fork_keep_the_threads_settings_or_take_the_requested_ones(tmp_path: Path) -> None:
    model = Model("text('hi');\n")
    read_only = {"type": "readOnly", "networkAccess": False}
    async with served(tmp_path, model, unload_delay=0) as (_harness, client):
        started = await client.request("thread/start", {"approvalPolicy": "untrusted", "sandbox": "read-only"})
        thread_id = started["thread"]["id"]
        await finish(client, await start_turn(client, thread_id))
        warm = await client.request("thread/resume", {"threadId": thread_id, "approvalPolicy": "never",
                                                      "sandbox": "danger-full-access"})
        same = await client.request("thread/fork", {"threadId": thread_id})
        other = await client.request("thread/fork", {"threadId": thread_id, "approvalPolicy": "on-request",
                                                     "sandbox": "workspace-write"})
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed", lambda p: p["threadId"] == thread_id)
        cold = await client.request("thread/resume", {"threadId": thread_id, "approvalPolicy": "on-request"})
    assert (warm["approvalPolicy"], warm["sandbox"]) == ("untrusted", read_only)  # loaded: the overrides ignored
    assert (same["approvalPolicy"], same["sandbox"]) == ("untrusted", read_only)  # a fork inherits
    assert other["approvalPolicy"] == "on-request" and other["sandbox"]["type"] == "workspaceWrite"
    assert (cold["approvalPolicy"], cold["sandbox"]) == ("on-request", read_only)  # cold: what it asks wins


@pytest.mark.parametrize(("method", "params", "wrong"), [
    pytest.param("thread/start", {"sandbox": "everything"}, "`sandbox` must be one of", id="mode"),
    pytest.param("thread/start", {"approvalPolicy": "on-failure"}, "`approvalPolicy` must be one of", id="on-failure"),
    pytest.param("thread/start", {"approvalPolicy": {"granular": {"mcp_elicitations": True, "rules": True,
                                                                   "sandbox_approval": True}}},
                 "granular approval policies", id="granular"),
    pytest.param("turn/start", {"sandboxPolicy": {"type": "externalSandbox"}}, "externalSandbox", id="external"),
    pytest.param("turn/start", {"sandboxPolicy": {"type": "workspaceWrite", "writableRoots": ["relative"]}},
                 "writable root", id="relative-root"),
    pytest.param("turn/start", {"sandboxPolicy": {"type": "workspaceWrite", "excludeSlashTmp": True}},
                 "private writable /tmp", id="exclude-tmp"),
])
async def test_settings_the_server_cannot_honour_are_bad_params(tmp_path: Path, method: str, params: Json,
                                                                wrong: str) -> None:
    async with served(tmp_path, Model("")) as (_harness, client):
        thread_id = (await start_thread(client))["id"]
        full = {"threadId": thread_id, "input": text_input("go"), **params} if method == "turn/start" else params
        with pytest.raises(AppServerError) as caught:
            await client.request(method, full)
        assert caught.value.code == -32602 and wrong in caught.value.message
        assert (await client.request("thread/loaded/list"))["data"] == [thread_id]  # nothing else changed


async def test_without_bubblewrap_the_default_falls_back_and_an_explicit_mode_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    async with served(tmp_path, Model(""), sandbox=None) as (_harness, client):
        with pytest.warns(RuntimeWarning, match="without a sandbox"):
            started = await client.request("thread/start", {})
        assert started["sandbox"] == {"type": "dangerFullAccess"}  # what the thread really runs
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/start", {"sandbox": "workspace-write"})
        assert caught.value.code == -32600 and "cannot work here" in caught.value.message
        assert "danger-full-access" in caught.value.message
        assert (await client.request("thread/loaded/list"))["data"] == [started["thread"]["id"]]


async def test_an_on_failure_server_configuration_is_refused(tmp_path: Path) -> None:
    approval = ta.Approvals(ta.ApprovalPolicy.ON_FAILURE, hook=_never_called)
    config = ta.AgentConfig(auth="k", workspace=tmp_path, approval=approval)
    with pytest.raises(ValueError, match="no on-failure approval policy"):
        async with open_app_server(config, home=tmp_path / "home"):
            pass


async def _never_called(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
    raise AssertionError("not asked")
