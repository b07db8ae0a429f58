"""What codex's front ends read at start-up, and the API-key login (issue 22 item 2).

The codex TUI stops at start-up when ``account/read``, ``config/read`` or
``configRequirements/read`` is missing (-32601 on main); it also calls ``hooks/list``,
``skills/list`` and the experimental ``collaborationMode/list``. Each answer says what
this server has; ``account/login/start`` with an API key changes the key the threads
loaded afterwards use, and nothing else is accepted. Every message is checked against
the schema (experimental methods against the experimental bundle).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent._config import ChatGptAuth, ChatGptAuthSnapshot
from trio_agent._serve._credential import Account
from trio_agent.testing import AppServerClient, AppServerError

from ._harness import Harness, app_server, assert_quiet, run_turn, start_thread


async def _key_of_next_thread(harness: Harness, client: AppServerClient, warmups: int) -> str:
    """Start a thread; the bearer token its agent's connection carried."""
    await start_thread(client)
    await harness.model.wait_for_warmups(warmups)
    return harness.model.server.handshakes[-1].headers["authorization"]


async def test_an_api_key_login_is_what_threads_loaded_afterwards_use(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client, other = await harness.client(), await harness.client()
        assert await client.request("account/read", {"refreshToken": False}) == {
            "account": {"type": "apiKey"}, "requiresOpenaiAuth": True}
        before = (await start_thread(client))["id"]
        assert await _key_of_next_thread(harness, client, 2) == "Bearer test-key"

        assert await client.request("account/login/start", {"type": "apiKey", "apiKey": " sk-given "}) == {
            "type": "apiKey"}
        for seen in (client, other):  # the server's account: every client is told
            done = await seen.read_notification("account/login/completed")
            assert done == {"loginId": None, "success": True, "error": None}
            assert (await seen.read_notification("account/updated"))["authMode"] == "apikey"
        assert await _key_of_next_thread(harness, client, 3) == "Bearer sk-given"
        completed = await run_turn(client, before, "still here")  # a loaded thread keeps its agent
        assert completed["turn"]["status"] == "completed"
        assert harness.model.server.handshakes[1].headers["authorization"] == "Bearer test-key"
        assert "sk-given" not in str(await client.request("account/read"))  # never sent back

        assert await client.request("account/logout") == {}
        assert (await other.read_notification("account/updated"))["authMode"] == "apikey"
        assert await _key_of_next_thread(harness, client, 4) == "Bearer test-key"  # the server's own again
        assert await client.request("account/logout") == {}  # nothing given: nothing to announce
        await assert_quiet(other, "account/updated", 5)
        assert await client.request("account/login/cancel", {"loginId": "x"}) == {"status": "notFound"}


@pytest.mark.parametrize(("params", "code", "said"), [
    ({"type": "chatgpt"}, -32600, "codex login"),
    ({"type": "chatgptDeviceCode"}, -32600, "only \"apiKey\""),
    ({"type": "amazonBedrock", "apiKey": "k", "region": "r"}, -32600, "restart trio-agent serve"),
    ({"type": "password"}, -32602, "`type` must be \"apiKey\""),
    ({"type": "apiKey"}, -32602, "`apiKey` must be a non-empty string"),
    ({"type": "apiKey", "apiKey": "  "}, -32602, "non-empty"),
    ({"type": "apiKey", "apiKey": "sk-a\r\nX-Injected: 1"}, -32602, "HTTP Authorization header"),
    ({"type": "apiKey", "apiKey": "sk a"}, -32602, "without spaces"),
    ({"type": "apiKey", "apiKey": "k" * 5000}, -32602, "at most 4096"),
])
async def test_other_logins_and_malformed_keys_are_refused_and_change_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, params: dict[str, object], code: int, said: str
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        with pytest.raises(AppServerError) as caught:
            await client.request("account/login/start", params)
        assert caught.value.code == code and said in caught.value.message
        assert await _key_of_next_thread(harness, client, 1) == "Bearer test-key"
        await assert_quiet(client, "account/updated", 1)


async def test_the_local_model_is_no_account_and_takes_no_key(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, model_provider="trio-agent-local") as harness:
        client = await harness.client()
        assert await client.request("account/read") == {"account": None, "requiresOpenaiAuth": False}
        with pytest.raises(AppServerError) as caught:
            await client.request("account/login/start", {"type": "apiKey", "apiKey": "sk-real"})
        assert caught.value.code == -32600 and "local scripted model" in caught.value.message
        assert await client.request("account/read") == {"account": None, "requiresOpenaiAuth": False}


class _Source:
    def validate(self) -> None:
        pass

    async def snapshot(self) -> ChatGptAuthSnapshot:
        await trio.lowlevel.checkpoint()
        return ChatGptAuthSnapshot("token")

    async def recover_unauthorized(self, rejected: ChatGptAuthSnapshot) -> None:
        await trio.lowlevel.checkpoint()


def test_a_codex_login_is_a_chatgpt_account_without_claims_the_server_cannot_make() -> None:
    account = Account(ChatGptAuth(_Source()), "openai")
    assert account.read() == {"account": {"type": "chatgpt", "email": None, "planType": "unknown"},
                              "requiresOpenaiAuth": True}
    assert account.auth_mode() == "chatgpt"
    account.given_key = "sk-given"
    assert account.read()["account"] == {"type": "apiKey"} and account.auth == "sk-given"


async def test_the_start_up_reads_say_what_this_server_has(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        read = await client.request("config/read", {"cwd": str(tmp_path)})
        assert read["config"] == {
            "model": "gpt-5.5", "model_provider": "openai", "model_reasoning_effort": "low",
            "model_context_window": 272000, "approval_policy": "never", "sandbox_mode": "danger-full-access",
            "approvals_reviewer": "user"}
        assert read["origins"] == {} and read["layers"] is None
        assert (await client.request("config/read", {"includeLayers": True}))["layers"] == []
        requirements = (await client.request("configRequirements/read"))["requirements"]
        assert requirements == {"allowedApprovalPolicies": ["untrusted", "on-request", "never"],
                                "allowedSandboxModes": ["read-only", "workspace-write", "danger-full-access"],
                                "allowedApprovalsReviewers": ["user", "auto_review"]}
        workspace = os.path.realpath(harness.workspace)
        assert await client.request("hooks/list", {"cwds": ["/a", "/b", "/a"]}) == {"data": [
            {"cwd": "/a", "hooks": [], "warnings": [], "errors": []},
            {"cwd": "/b", "hooks": [], "warnings": [], "errors": []}]}
        assert (await client.request("hooks/list", {}))["data"][0]["cwd"] == workspace
        thread = await start_thread(client, cwd=str(tmp_path))
        by_thread = await client.request("hooks/list", {"threadId": thread["id"]})
        assert by_thread == {"data": [{"cwd": os.path.realpath(tmp_path), "hooks": [], "warnings": [], "errors": []}]}
        assert (await client.request("skills/list", {"cwds": [], "forceReload": True}))["data"][0]["cwd"] == workspace
        assert await client.request("collaborationMode/list", {}) == {"data": []}
        assert await client.request("plugin/installed", {"cwds": [workspace]}) == {
            "marketplaces": [], "marketplaceLoadErrors": []}
        assert (await client.request("plugin/list", {}))["marketplaces"] == []
        for method in ("app/list", "mcpServerStatus/list"):
            assert await client.request(method, {"limit": 5}) == {"data": [], "nextCursor": None}
        with pytest.raises(AppServerError) as caught:
            await client.request("hooks/list", {"cwds": ["/a", 3]})
        assert caught.value.code == -32602 and "`cwds`" in caught.value.message
