"""Sign in with an existing Codex login (issue 12, item 3): ``ChatGptAuth.from_codex_home``
against the fake server's HTTP half as both the Responses API and the token endpoint."""

from __future__ import annotations

import base64
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import scripted


def jwt(exp: float) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'exp': int(exp), 'sub': 'user'})}.signature"


def write_login(home: Path, **tokens: Any) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "auth.json"
    data = {"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "last_refresh": "2026-11-01T00:00:00Z",
            "extra_field_codex_keeps": {"x": 1},
            "tokens": {"id_token": "id-1", "access_token": jwt(time.time() + 3600), "refresh_token": "refresh-1",
                       "account_id": "acct-1", **tokens}}
    path.write_text(json.dumps(data))
    return path


def https(server: FakeResponsesServer) -> ta.Responses:
    return ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, api_base_url=server.http_base_url)


async def test_api_key_mode_uses_the_key(tmp_path: Path) -> None:
    (tmp_path / "auth.json").write_text(json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-from-codex"}))
    assert ta.ChatGptAuth.from_codex_home(tmp_path) == "sk-from-codex"


async def test_codex_home_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "auth.json").write_text(json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-env"}))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    assert ta.ChatGptAuth.from_codex_home() == "sk-env"


@pytest.mark.parametrize(("content", "why"), [
    (None, "cannot read the Codex login"),
    ("{not json", "is not JSON"),
    ("[]", "is not a JSON object"),
    ('{"auth_mode": "chatgpt", "tokens": {}}', "has no ChatGPT access token"),
    ('{"auth_mode": "apikey"}', "holds no OPENAI_API_KEY"),
])
def test_an_invalid_login_is_a_clear_error_never_a_fallback(tmp_path: Path, content: str | None, why: str) -> None:
    if content is not None:
        (tmp_path / "auth.json").write_text(content)
    with pytest.raises(ta.ConfigError, match=why) as info:
        ta.ChatGptAuth.from_codex_home(tmp_path)
    assert "codex login" in str(info.value) or "OPENAI_API_KEY" in str(info.value)


async def test_chatgpt_mode_sends_the_token_and_account(server: FakeResponsesServer, workspace: Path, tmp_path: Path
                                                        ) -> None:
    write_login(tmp_path)
    auth = ta.ChatGptAuth.from_codex_home(tmp_path)
    assert isinstance(auth, ta.ChatGptAuth)
    heads: list[dict[str, str]] = []

    async def script() -> None:
        request = await server.accept_http()
        heads.append(request.headers)
        await request.send_final("resp-1", "hello")

    config = ta.AgentConfig(auth=auth, workspace=workspace, responses=https(server))
    async with scripted(script), ta.open_agent(config) as agent:
        assert (await (await agent.prompt("hi")).result()).final_message == "hello"
    assert heads[0]["authorization"].startswith("Bearer ey")
    assert heads[0]["chatgpt-account-id"] == "acct-1"
    assert "SECRET" not in repr(auth) and "refresh-1" not in repr(config)


async def test_an_expiring_token_is_refreshed_and_written_back_atomically(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = write_login(tmp_path, access_token=jwt(time.time() + 60))  # within the 5-minute margin
    fresh = jwt(time.time() + 7200)
    token_requests: list[Any] = []
    heads: list[dict[str, str]] = []

    async def script() -> None:
        token = await server.accept_http()
        token_requests.append((token.path, token.body))
        await token.respond(200, json.dumps({"access_token": fresh, "refresh_token": "refresh-2", "id_token": "id-2"}))
        request = await server.accept_http()
        heads.append(request.headers)
        await request.send_final("resp-1", "hello")

    auth = ta.ChatGptAuth.from_codex_home(tmp_path, token_url=server.http_base_url.rsplit("/v1", 1)[0] + "/oauth/token")
    config = ta.AgentConfig(auth=auth, workspace=workspace, responses=https(server))
    async with scripted(script), ta.open_agent(config) as agent:
        assert (await (await agent.prompt("hi")).result()).final_message == "hello"
    assert token_requests == [("/oauth/token", {"client_id": "app_EMoamEEZ73f0CkXaXp7hrann",
                                                "grant_type": "refresh_token", "refresh_token": "refresh-1"})]
    assert heads[0]["authorization"] == f"Bearer {fresh}"
    saved = json.loads(path.read_text())
    assert saved["tokens"] == {"id_token": "id-2", "access_token": fresh, "refresh_token": "refresh-2",
                               "account_id": "acct-1"}
    assert saved["extra_field_codex_keeps"] == {"x": 1}  # every other field kept
    assert saved["last_refresh"] != "2026-11-01T00:00:00Z"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name != "workspace"] == ["auth.json"]  # no temporary file left


async def test_a_401_refreshes_once_and_retries(server: FakeResponsesServer, workspace: Path, tmp_path: Path) -> None:
    path = write_login(tmp_path)
    original = json.loads(path.read_text())["tokens"]["access_token"]
    fresh = jwt(time.time() + 7200)
    order: list[str] = []

    async def script() -> None:
        first = await server.accept_http()
        order.append("model original" if first.headers["authorization"] == f"Bearer {original}" else "model ?")
        await first.respond(401, '{"error":{"message":"expired","code":"token_expired"}}')
        token = await server.accept_http()
        order.append("refresh " + token.body["refresh_token"])
        await token.respond(200, json.dumps({"access_token": fresh, "refresh_token": "refresh-2"}))
        second = await server.accept_http()
        assert second.headers["authorization"] == f"Bearer {fresh}"
        order.append("model fresh")
        await second.send_final("resp-1", "hello")

    auth = ta.ChatGptAuth.from_codex_home(tmp_path, token_url=server.http_base_url.rsplit("/v1", 1)[0] + "/oauth/token")
    config = ta.AgentConfig(auth=auth, workspace=workspace, responses=https(server))
    async with scripted(script), ta.open_agent(config) as agent:
        assert (await (await agent.prompt("hi")).result()).final_message == "hello"
    assert order == ["model original", "refresh refresh-1", "model fresh"]


async def test_a_refused_refresh_says_to_log_in_again(server: FakeResponsesServer, workspace: Path, tmp_path: Path
                                                     ) -> None:
    write_login(tmp_path, access_token=jwt(time.time() - 10))

    async def script() -> None:
        token = await server.accept_http()
        await token.respond(400, '{"error":{"code":"refresh_token_expired","message":"expired"}}')

    auth = ta.ChatGptAuth.from_codex_home(tmp_path, token_url=server.http_base_url.rsplit("/v1", 1)[0] + "/oauth/token")
    config = ta.AgentConfig(auth=auth, workspace=workspace, responses=https(server))
    async with scripted(script), ta.open_agent(config) as agent:
        with pytest.raises(ta.TurnFailed) as info:
            await (await agent.prompt("hi")).result()
    error = info.value.responses_error
    assert isinstance(error, ta.AuthenticationError) and error.code == "refresh_token_expired"
    assert "run `codex login` again" in str(error) and "refresh-1" not in str(error)


async def test_a_file_another_process_rotated_is_used_without_refreshing(tmp_path: Path) -> None:
    from trio_agent._codex_login import CodexAuthFile

    path = write_login(tmp_path)
    source = CodexAuthFile(path, token_url="http://127.0.0.1:9/never")  # a refresh would fail loudly
    stale = await source.snapshot()
    rotated = json.loads(path.read_text())
    rotated["tokens"]["access_token"] = jwt(time.time() + 9000)
    path.write_text(json.dumps(rotated))
    await source.recover_unauthorized(stale)  # the file already has a newer token: no request
    assert (await source.snapshot()).token == rotated["tokens"]["access_token"]
    await trio.lowlevel.checkpoint()
