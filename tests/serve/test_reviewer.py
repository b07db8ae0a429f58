"""``approvalsReviewer`` (issue 22 item 2; trio_agent/_serve/_reviewer.py).

The official Python SDK starts threads with ``approvalPolicy: "on-request"`` and
``approvalsReviewer: "auto_review"``, and its default approval handler accepts every
request: codex would have its reviewer model decide, never that handler. Before, this
server answered ``"user"`` and sent the request to the client, whose handler approved a
sandbox escape the model asked for. Now ``auto_review`` is the server's review, which
has no reviewer model and denies; ``"user"`` still asks the client (the positive
control). The reviewer is kept like the sandbox and policy. Real commands in the real
sandbox: Trio's real clock, each test bounded; every message is schema-checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trio_agent.testing import AppServerClient, AppServerError, ServerRequest

from ._harness import Json
from .test_approvals import Model, finish, served, start_turn

ESCAPE = "touch escaped.txt && echo escaped"


def escalated(cmd: str) -> str:
    """JS asking to run ``cmd`` outside the sandbox, printing ``ok <exit>:<output>`` or ``error ...``."""
    args = json.dumps({"cmd": cmd, "login": False, "sandbox_permissions": "require_escalated",
                       "justification": "needs to write outside the sandbox"})
    return (f"try {{ const r = await tools.exec_command({args}); text(`ok ${{r.exit_code}}:${{r.output}}`); }} "
            "catch (e) { text(`error ${e.message}`); }\n")


async def run_accepting_everything(client: AppServerClient, thread_id: str) -> tuple[list[ServerRequest], list[Json]]:
    """One turn whose every server request is accepted (what the SDK's default approval
    handler does); the requests, and the other messages of the turn."""
    turn_id = await start_turn(client, thread_id)
    asked: list[ServerRequest] = []
    while True:  # the next server request or the turn's end, whichever comes first
        message = await client._take(lambda m: ("id" in m and "method" in m) or (
            m.get("method") == "turn/completed" and m["params"]["turn"]["id"] == turn_id))
        if message.get("method") == "turn/completed":
            return asked, client.take_pending()
        asked.append(ServerRequest(message["id"], message["method"], message["params"]))
        await client.respond(message["id"], {"decision": "accept"})


async def _sdk_thread(client: AppServerClient, reviewer: str) -> tuple[str, Json]:
    started = await client.request("thread/start", {"approvalPolicy": "on-request", "approvalsReviewer": reviewer,
                                                    "sandbox": "read-only"})
    return started["thread"]["id"], started


async def test_auto_review_denies_a_sandbox_escape_without_asking_the_accept_all_client(tmp_path: Path) -> None:
    """Fails before the fix: the request went to the client, which accepted, and the
    command ran outside the read-only sandbox (escaped.txt exists)."""
    model = Model(escalated(ESCAPE))
    async with served(tmp_path, model) as (harness, client):
        thread_id, started = await _sdk_thread(client, "auto_review")
        asked, seen = await run_accepting_everything(client, thread_id)
    assert asked == []  # nothing was sent to the client to approve
    assert not (harness.workspace / "escaped.txt").exists()
    assert started["approvalsReviewer"] == "auto_review" and started["approvalPolicy"] == "on-request"
    reviews = [m for m in seen if m.get("method", "").startswith("item/autoApprovalReview/")]
    assert [m["method"] for m in reviews] == ["item/autoApprovalReview/started", "item/autoApprovalReview/completed"]
    review = reviews[1]["params"]
    assert review["review"]["status"] == "denied" and "no reviewer model" in review["review"]["rationale"]
    # One item per command (issue 22 item 4): the review names that item and shows its command line.
    command = next(m["params"]["item"] for m in seen if m.get("method") == "item/completed"
                   and m["params"]["item"]["type"] == "commandExecution"
                   and m["params"]["item"]["commandActions"][0]["command"] == ESCAPE)
    assert review["action"] == {"type": "command", "command": command["command"], "cwd": str(harness.workspace),
                                "source": "unifiedExec"}
    assert ESCAPE in command["command"]
    assert command["status"] == "declined" and review["targetItemId"] == command["id"]
    assert model.outputs[0].startswith("error") and "automatic review" in model.outputs[0]


async def test_the_user_reviewer_asks_the_client_and_its_answer_decides(tmp_path: Path) -> None:
    """The positive control: the same escape, reviewed by the client, runs when accepted."""
    model = Model(escalated(ESCAPE))
    async with served(tmp_path, model) as (harness, client):
        thread_id, started = await _sdk_thread(client, "user")
        assert started["approvalsReviewer"] == "user"
        asked, seen = await run_accepting_everything(client, thread_id)
    assert [request.method for request in asked] == ["item/commandExecution/requestApproval"]
    assert (harness.workspace / "escaped.txt").exists() and model.outputs == ["ok 0:escaped\n"]
    assert not [m for m in seen if m.get("method", "").startswith("item/autoApprovalReview/")]


async def test_the_reviewer_is_kept_and_reported_across_resume_and_fork(tmp_path: Path) -> None:
    model = Model("text('hi');\n")
    async with served(tmp_path, model, unload_delay=0) as (_harness, client):
        thread_id = (await client.request("thread/start", {"approvalsReviewer": "auto_review"}))["thread"]["id"]
        await finish(client, await start_turn(client, thread_id))
        forked = await client.request("thread/fork", {"threadId": thread_id})
        assert forked["approvalsReviewer"] == "auto_review"  # inherited
        asked_for = await client.request("thread/fork", {"threadId": thread_id, "approvalsReviewer": "user"})
        assert asked_for["approvalsReviewer"] == "user"
        warm = await client.request("thread/resume", {"threadId": thread_id, "approvalsReviewer": "user"})
        assert warm["approvalsReviewer"] == "auto_review"  # a warm resume keeps what the thread has
        for other in (forked, asked_for):
            await client.request("thread/unsubscribe", {"threadId": other["thread"]["id"]})
        await client.request("thread/unsubscribe", {"threadId": thread_id})
        await client.read_notification("thread/closed", lambda p: p["threadId"] == thread_id)
        cold = await client.request("thread/resume", {"threadId": thread_id})
        assert cold["approvalsReviewer"] == "auto_review"  # from the thread record
        listed = await client.request("thread/start", {})
        assert listed["approvalsReviewer"] == "user"  # the default
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/start", {"approvalsReviewer": "guardian"})
        assert caught.value.code == -32602 and "approvalsReviewer" in caught.value.message
