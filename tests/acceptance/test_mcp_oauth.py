"""OAuth for Streamable HTTP MCP servers: ``trio-agent mcp login`` (``_mcp_oauth.login``)
against a real SDK server that is its own authorization server
(``tests/fixtures/mcp_oauth_server.py``), all on loopback; the browser is an HTTP
client that follows the authorization server's redirect to the login's loopback
listener. Then agents using the stored tokens, refreshed when they expire."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import trio_agent as ta
from trio_agent._tools._mcp_oauth import McpOAuthError, login, token_path
from trio_agent.testing import FakeConnection, FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm

SERVER = Path(__file__).parent.parent / "fixtures" / "mcp_oauth_server.py"


class OAuthServer:
    def __init__(self, url: str, process: trio.Process) -> None:
        self.url, self.process = url, process


async def _start(nursery: trio.Nursery, *flags: str, script: Path = SERVER) -> AsyncIterator[OAuthServer]:
    process = await trio.lowlevel.open_process([sys.executable, str(script), *flags], stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    line = b""
    with trio.fail_after(30):
        while not line.endswith(b"\n"):
            line += await process.stdout.receive_some(64)
    try:
        yield OAuthServer(f"http://127.0.0.1:{int(line)}/mcp", process)
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


@pytest.fixture
async def oauth_server(nursery: trio.Nursery) -> AsyncIterator[OAuthServer]:
    async for server in _start(nursery):
        yield server


@pytest.fixture
async def refusing_server(nursery: trio.Nursery) -> AsyncIterator[OAuthServer]:
    async for server in _start(nursery, "--refuse"):
        yield server


@pytest.fixture
async def no_refresh_server(nursery: trio.Nursery) -> AsyncIterator[OAuthServer]:
    async for server in _start(nursery, "--refuse-refresh"):
        yield server


def browser(seen: list[str]) -> Callable[[str], Awaitable[None]]:
    """What the user's browser does: open the URL, follow the redirects (to the login's
    loopback listener)."""

    async def open_url(url: str) -> None:
        seen.append(url)
        async with httpx.AsyncClient(follow_redirects=True) as client:
            await client.get(url)

    return open_url


async def test_login_stores_tokens_0600_and_the_agent_uses_them(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, oauth_server: OAuthServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    seen: list[str] = []
    with trio.fail_after(30):
        path = await login("docs", oauth_server.url, announce=browser(seen), home=home)
    assert path == token_path(home, "docs", oauth_server.url)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    stored = json.loads(path.read_text())
    assert stored["server_url"] == oauth_server.url and stored["tokens"]["access_token"].startswith("at-")
    assert seen and "code_challenge=" in seen[0] and "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in seen[0]

    monkeypatch.setenv("TRIO_AGENT_HOME", str(home))
    tools = ta.Tools.default().with_mcp("docs", ta.McpServer.http(oauth_server.url, oauth=True))
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(lambda e: e.kind is ta.EventKind.MCP_SERVER_READY)
        await conn.send_tool_call("resp-1", "call-1", "exec",
                                  "text((await tools.mcp__docs__add({a: 40, b: 2})).structuredContent.result)")
        output = (await _next(conn))["input"][0]["output"]
        assert output[1] == {"type": "input_text", "text": "42"}
        await conn.send_final("resp-2", "logged in")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("add")).result()).final_message == "logged in"
    assert json.loads(path.read_text()) == stored  # a valid token is not refreshed


async def _next(conn: FakeConnection) -> Any:
    """The next request's body, as JSON data the test picks apart."""
    return await conn.next_request()


def _expire(path: Path) -> Any:
    """The stored access token as if it had expired while no agent ran."""
    stored = json.loads(path.read_text())
    stored["tokens"]["expires_at"] = 1.0
    path.write_text(json.dumps(stored))  # the file keeps its mode (0600)
    return stored


async def _server_error(server: FakeResponsesServer, workspace: Path, tools: ta.Tools) -> tuple[Any, Any]:
    """The ``mcp.server.failed`` error of the agent's one server, and what ``tool_search``
    says of it."""
    log = EventLog()
    found: list[Any] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await log.wait_for(lambda e: e.kind is ta.EventKind.MCP_SERVER_FAILED)
        await conn.send_tool_call("resp-1", "call-1", "exec",
                                  "text(JSON.stringify(await tools.tool_search({query: 'add'})))")
        found.append(json.loads((await _next(conn))["input"][0]["output"][1]["text"]))
        await conn.send_final("resp-2", "carried on")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("try")).result()).final_message == "carried on"
    [failed] = [e for e in log.events if e.kind is ta.EventKind.MCP_SERVER_FAILED]
    return failed.payload["error"], found[0]


async def test_an_expired_access_token_is_refreshed_and_the_new_pair_stored(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, oauth_server: OAuthServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    with trio.fail_after(30):
        path = await login("docs", oauth_server.url, announce=browser([]), home=home)
    before = _expire(path)
    monkeypatch.setenv("TRIO_AGENT_HOME", str(home))
    tools = ta.Tools.default().with_mcp("docs", ta.McpServer.http(oauth_server.url, oauth=True, direct=True))
    log = EventLog()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "up")
        await conn.next_request()
        await conn.send_tool_call("resp-2", "call-1", "mcp__docs__add", {"a": 1, "b": 2})
        output = (await _next(conn))["input"][-1]["output"]
        assert output == [{"type": "input_text", "text": "3"}]
        await conn.send_final("resp-3", "refreshed")

    async with scripted(script, 30) as nursery, ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("wait")).result()
        await log.wait_for(lambda e: e.kind is ta.EventKind.MCP_SERVER_READY)
        assert (await (await agent.prompt("add")).result()).final_message == "refreshed"
    after = json.loads(path.read_text())
    assert after["tokens"]["access_token"] != before["tokens"]["access_token"]
    assert after["tokens"]["refresh_token"] != before["tokens"]["refresh_token"]  # rotated by the server
    assert after["tokens"]["expires_at"] > 1.0 and stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_refresh_the_server_refuses_fails_the_server_with_the_login_command(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, no_refresh_server: OAuthServer,
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    url = no_refresh_server.url
    with trio.fail_after(30):
        path = await login("docs", url, announce=browser([]), home=home)
    _expire(path)
    monkeypatch.setenv("TRIO_AGENT_HOME", str(home))
    tools = ta.Tools.default().with_mcp("docs", ta.McpServer.http(url, oauth=True))
    error, search = await _server_error(server, workspace, tools)
    assert error == (f"MCP server docs: its OAuth login expired or was revoked and could not be refreshed: "
                     f"run `trio-agent mcp login docs {url}`")
    assert search["failed_servers"] == {"docs": error}
    assert capfd.readouterr().err == ""  # the SDK's log of its failed flow is not on the host's stderr


async def test_missing_unsafe_and_garbage_token_files_fail_the_server_saying_what_to_do(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, oauth_server: OAuthServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    url = oauth_server.url
    monkeypatch.setenv("TRIO_AGENT_HOME", str(home))
    tools = ta.Tools.default().with_mcp("docs", ta.McpServer.http(url, oauth=True))
    error, _ = await _server_error(server, workspace, tools)
    assert error == f"MCP server docs needs an OAuth login: run `trio-agent mcp login docs {url}`"

    with trio.fail_after(30):
        path = await login("docs", url, announce=browser([]), home=home)
    path.chmod(0o644)
    error, _ = await _server_error(server, workspace, tools)
    assert error == (f"the MCP OAuth token file {path} can be read by other users (mode 644); its tokens may have "
                     f"leaked: delete it and run `trio-agent mcp login docs {url}` (or, if only you could read it, "
                     f"chmod 600 {path})")
    for garbage in ("{not json", json.dumps({"format": 1, "server_url": "http://elsewhere/mcp"}), "[]"):
        path.write_text(garbage)
        path.chmod(0o600)
        error, _ = await _server_error(server, workspace, tools)
        assert error == (f"the MCP OAuth token file {path} is not one trio-agent wrote for {url}: "
                         f"delete it and run `trio-agent mcp login docs {url}`")


async def test_an_authorization_server_that_refuses_leaves_no_token_file(
    tmp_path: Path, refusing_server: OAuthServer
) -> None:
    home = tmp_path / "home"
    with trio.fail_after(30), pytest.raises(McpOAuthError) as refused:
        await login("docs", refusing_server.url, announce=browser([]), home=home)
    assert str(refused.value) == "the authorization server refused the login: access_denied (the user declined)"
    assert not token_path(home, "docs", refusing_server.url).exists()


def test_oauth_configuration_is_checked() -> None:
    with pytest.raises(ta.ConfigError, match="oauth=True or a bearer token, not both"):
        ta.McpServer.http("http://x/mcp", oauth=True, bearer_token="t")
    with pytest.raises(ta.ConfigError, match="oauth=True is for Streamable HTTP servers"):
        ta.McpServer("stdio", command="srv", oauth=True)
    with pytest.raises(ta.ConfigError, match="direct= and oauth= must be True or False"):
        ta.McpServer.http("http://x/mcp", oauth="yes")  # type: ignore[arg-type]


async def test_two_agents_refreshing_one_login_both_keep_working(tmp_path: Path, oauth_server: OAuthServer) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from trio_agent._tools._mcp_oauth import agent_auth

    home = tmp_path / "home"
    url = oauth_server.url
    with trio.fail_after(30):
        path = await login("docs", url, announce=browser([]), home=home)
        _expire(path)
        # Both read the expired pair; the first refresh rotates its refresh token away.
        first, second = agent_auth("docs", url, home), agent_auth("docs", url, home)
        for auth in (first, second):
            async with httpx2.AsyncClient(auth=auth) as http, \
                    Client(streamable_http_client(url, http_client=http), cache=None) as client:
                assert [tool.name for tool in (await client.list_tools()).tools] == ["add"]
    assert json.loads(path.read_text())["tokens"]["expires_at"] > 1.0


async def test_a_login_to_a_server_without_oauth_or_to_no_server_says_so(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    home = tmp_path / "home"
    async for plain in _start(nursery, "--http", script=SERVER.with_name("mcp_server.py")):
        with trio.fail_after(30), pytest.raises(McpOAuthError) as needless:
            await login("docs", plain.url, announce=browser([]), home=home)
        assert str(needless.value) == f"MCP server docs at {plain.url} did not ask for an OAuth login: it needs none"
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    await listener.aclose()  # a port nothing listens on
    with trio.fail_after(30), pytest.raises(McpOAuthError) as unreachable:
        await login("docs", f"http://127.0.0.1:{port}/mcp", announce=browser([]), home=home)
    assert str(unreachable.value).startswith("the login failed: ConnectError: ")
    assert ";" not in str(unreachable.value)  # one cause, said once
    assert not home.exists()
