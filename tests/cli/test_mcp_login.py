"""``trio-agent mcp login NAME URL`` / ``logout`` as a user runs them: the console
command in a subprocess, against the OAuth-requiring SDK server of
``tests/fixtures/mcp_oauth_server.py``; the test is the browser (it opens the printed
URL and follows the redirect to the command's loopback listener)."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._tools._mcp_oauth import token_path

from ..acceptance.test_mcp_oauth import OAuthServer, _start, browser
from ._cli import cli_env, open_cli, run_cli
from .test_settings import settings


@pytest.fixture
async def oauth_server(nursery: trio.Nursery) -> AsyncIterator[OAuthServer]:
    async for server in _start(nursery):
        yield server


@pytest.fixture
async def refusing_server(nursery: trio.Nursery) -> AsyncIterator[OAuthServer]:
    async for server in _start(nursery, "--refuse"):
        yield server


async def test_login_prints_the_url_takes_the_redirect_and_stores_the_tokens_then_logout_deletes_them(
    tmp_path: Path, oauth_server: OAuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    env = cli_env(TRIO_AGENT_HOME=str(home))
    url = oauth_server.url
    async with open_cli("mcp", "login", "docs", url, "--no-browser", cwd=tmp_path, env=env) as cli:
        await cli.wait_for(lambda c: c.stdout.endswith("\n"))
        [authorize] = cli.lines
        assert authorize.startswith(url.removesuffix("/mcp") + "/authorize?")
        await browser([])(authorize)
        assert await cli.wait() == 0
    path = token_path(home, "docs", url)
    assert cli.stderr.splitlines() == ["To log in to MCP server docs, open this URL in your browser:",
                                       f"Logged in to docs; the tokens are in {path}"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = path.read_text()
    assert "at-" in token and "at-" not in cli.stdout + cli.stderr  # never printed

    monkeypatch.setenv("TRIO_AGENT_HOME", str(home))  # `run --mcp NAME=URL` uses the stored login
    assert settings("--mcp", f"docs={url}").tools.mcp_servers["docs"] == ta.McpServer.http(url, oauth=True)
    assert settings("--mcp", f"other={url}").tools.mcp_servers["other"] == ta.McpServer.http(url)

    done = await run_cli("mcp", "logout", "docs", url, cwd=tmp_path, env=env)
    assert (done.returncode, done.stderr.decode()) == (0, f"Logged out of docs: deleted {path}\n")
    assert not path.exists()
    again = await run_cli("mcp", "logout", "docs", url, cwd=tmp_path, env=env)
    assert (again.returncode, again.stderr.decode()) == (0, "No login was stored for docs\n")


async def test_a_refused_login_exits_1_with_the_reason_and_stores_nothing(
    tmp_path: Path, refusing_server: OAuthServer
) -> None:
    home = tmp_path / "home"
    async with open_cli("mcp", "login", "docs", refusing_server.url, "--no-browser", cwd=tmp_path,
                        env=cli_env(TRIO_AGENT_HOME=str(home))) as cli:
        await cli.wait_for(lambda c: c.stdout.endswith("\n"))
        await browser([])(cli.lines[0])
        assert await cli.wait() == 1
    assert cli.stderr.splitlines()[-1] == ("trio-agent mcp login: error: the authorization server refused the login: "
                                           "access_denied (the user declined)")
    assert not home.exists()


async def test_bad_names_and_urls_are_refused_before_anything_runs(tmp_path: Path) -> None:
    bad_name = await run_cli("mcp", "login", "a/b", "http://127.0.0.1:9/mcp", cwd=tmp_path)
    assert bad_name.returncode == 2 and b"MCP server name 'a/b' is invalid" in bad_name.stderr
    bad_url = await run_cli("mcp", "logout", "docs", "ftp://x", cwd=tmp_path)
    assert bad_url.returncode == 2 and b"http:// or https:// URL" in bad_url.stderr
