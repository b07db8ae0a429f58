"""``permissions`` (an experimental named permission profile, issue 22): the codex TUI
starts its title-writing thread with ``permissions: ":read-only"``. On main the field
was ignored, so that thread ran with the server's default sandbox instead; now codex's
built-in profiles are the three sandbox modes and any other is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent.testing import AppServerError

from ._harness import app_server

READ_ONLY = {"type": "readOnly", "networkAccess": False}


async def test_the_built_in_profiles_are_the_sandbox_modes_and_others_are_refused(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, sandbox=None, unload_delay=0) as harness:
        client = await harness.client()
        started = await client.request("thread/start", {"permissions": ":read-only", "ephemeral": True})
        assert started["sandbox"] == READ_ONLY
        default = await client.request("thread/start", {"ephemeral": True})  # the positive control
        assert default["sandbox"]["type"] in ("workspaceWrite", "dangerFullAccess")
        full = await client.request("thread/start", {"permissions": ":danger-full-access"})
        assert full["sandbox"] == {"type": "dangerFullAccess"}
        forked_from = full["thread"]["id"]
        await client.request("thread/unsubscribe", {"threadId": forked_from})
        await client.read_notification("thread/closed", lambda p: p["threadId"] == forked_from)
        resumed = await client.request("thread/resume", {"threadId": forked_from, "permissions": ":read-only"})
        assert resumed["sandbox"] == READ_ONLY  # a cold resume takes it, as it takes `sandbox`
        for params, said in (({"permissions": ":mine"}, "built-in profiles"),
                             ({"permissions": ":read-only", "sandbox": "read-only"}, "cannot be combined"),
                             ({"permissions": 3}, "built-in profiles")):
            with pytest.raises(AppServerError) as caught:
                await client.request("thread/start", params)
            assert caught.value.code == -32602 and said in caught.value.message
