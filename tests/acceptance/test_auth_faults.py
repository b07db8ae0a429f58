"""Authentication faults, by cause and the same on both transports (issue 7 bug 6,
issue 8 item 10), over real loopback with the public API.

- A ChatGPT auth source that raises (``OSError``, an httpx error, any ``Exception``) or
  hands out an unusable token fails the warmup and the turn with
  ``ta.AuthenticationError`` (``error_class="auth_source"``) -- it never crashes
  ``open_agent``'s nursery, and no message carries the token.
- HTTP 401/403 is ``ta.AuthenticationError`` with ``status`` and ``code`` whether it
  answered the WebSocket handshake or an HTTPS request; a refused connection is
  ``ta.ConnectionFailed`` on both.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._transport.auth import recover_unauthorized
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, scripted

TOKEN = "secret-subscription-token"
TRANSPORTS = [ta.Transport.WEBSOCKET, ta.Transport.HTTPS]


class FailingSource:
    """A ChatGPT auth source whose ``snapshot()`` raises ``error`` (or returns ``snapshot``)."""

    def __init__(self, error: Exception | None = None, snapshot: ta.ChatGptAuthSnapshot | None = None) -> None:
        self.error = error
        self.result = snapshot or ta.ChatGptAuthSnapshot(token=TOKEN, account_id="account-1")
        self.calls = 0

    def validate(self) -> None:
        return None

    async def snapshot(self) -> ta.ChatGptAuthSnapshot:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        if self.error is not None:
            raise self.error
        return self.result

    async def recover_unauthorized(self, rejected: ta.ChatGptAuthSnapshot) -> None:
        raise OSError(f"could not refresh {rejected.token}: ~/.codex/auth.json is read-only")


def responses_for(server: FakeResponsesServer, transport: ta.Transport, **kw: object) -> ta.Responses:
    if transport is ta.Transport.WEBSOCKET:
        return ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, **kw)  # type: ignore[arg-type]
    return ta.Responses(profile=ta.Profile.OPENAI,
                        transport=transport, api_base_url=server.http_base_url, **kw)  # type: ignore[arg-type]


def config_for(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, auth: str | ta.ChatGptAuth, **kw: object
) -> ta.AgentConfig:
    return ta.AgentConfig(
        auth=auth, workspace=workspace, responses=responses_for(server, transport, **kw), session_id="auth-test"
    )


async def fail_one_prompt(config: ta.AgentConfig, script: Callable[[], object] | None = None) -> tuple[
    ta.TurnFailed, EventLog
]:
    log = EventLog()

    async def no_script() -> None:
        return None

    async with scripted(script or no_script) as nursery:  # type: ignore[arg-type]
        async with ta.open_agent(config) as agent:  # must not raise: failures are values
            nursery.start_soon(log.consume, agent.events)
            with pytest.raises(ta.TurnFailed) as info:
                await (await agent.prompt("hello")).result()
    return info.value, log


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
@pytest.mark.parametrize(
    "error",
    [
        OSError(2, "No such file or directory: '~/.codex/auth.json'"),
        httpx.ConnectError("token refresh endpoint unreachable"),
        ValueError("auth.json is not valid JSON"),
    ],
    ids=["oserror", "httpx", "exception"],
)
async def test_a_failing_auth_source_fails_the_turn_not_the_agent(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, error: Exception
) -> None:
    source = FailingSource(error)
    failed, log = await fail_one_prompt(config_for(server, workspace, transport, ta.ChatGptAuth(source)))

    auth_error = failed.responses_error
    assert isinstance(auth_error, ta.AuthenticationError)
    assert auth_error.error_class == "auth_source" and not auth_error.retryable
    assert auth_error.status is None and auth_error.code is None
    assert auth_error.__cause__ is error
    assert "the ChatGPT auth source failed to provide a token" in str(auth_error)
    assert type(error).__name__ in str(auth_error) and "log in to ChatGPT again" in str(auth_error)
    assert log.kinds()[-1] == "run.failed"
    # Nothing reached the server: the headers are built before anything is dialed.
    assert server.handshakes == [] and server.requests == []
    if transport is ta.Transport.WEBSOCKET:
        (warmup_failed,) = log.payloads("model.warmup.failed")
        assert "the ChatGPT auth source failed" in warmup_failed["error"]
        assert "model.warmup.completed" not in log.kinds()
        # the warmup's connection, then the first request's (warmup_fallback): both failed
        assert [p["purpose"] for p in log.payloads("model.connection.failed")] == ["initial", "warmup_fallback"]
        assert source.calls == 2
    else:
        assert "model.warmup.started" not in log.kinds()  # HTTPS has no warmup
        assert source.calls == 1
    (attempt_failed,) = log.payloads("model.attempt.failed")
    assert attempt_failed["error_class"] == "auth_source" and attempt_failed["retryable"] is False


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
@pytest.mark.parametrize(
    "snapshot",
    [
        ta.ChatGptAuthSnapshot(token=TOKEN + "\r\nX-Injected: 1"),
        ta.ChatGptAuthSnapshot(token=""),
        ta.ChatGptAuthSnapshot(token=TOKEN, account_id="acct\n1"),
    ],
    ids=["crlf-token", "empty-token", "control-account-id"],
)
async def test_a_token_that_cannot_be_a_header_is_refused_without_echoing_it(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, snapshot: ta.ChatGptAuthSnapshot
) -> None:
    failed, log = await fail_one_prompt(
        config_for(server, workspace, transport, ta.ChatGptAuth(FailingSource(snapshot=snapshot)))
    )
    auth_error = failed.responses_error
    assert isinstance(auth_error, ta.AuthenticationError) and auth_error.error_class == "auth_source"
    assert "log in to ChatGPT again" in str(auth_error)
    assert server.handshakes == [] and server.requests == []
    for text in [str(failed), str(auth_error), *(str(e.payload) for e in log.events)]:
        assert TOKEN not in text


async def test_recover_unauthorized_maps_a_failing_source_and_redacts_the_token(tmp_path: Path) -> None:
    config = ta.AgentConfig(auth=ta.ChatGptAuth(FailingSource()), workspace=tmp_path)
    rejected = ta.ChatGptAuthSnapshot(token=TOKEN)
    with pytest.raises(ta.AuthenticationError) as info:
        await recover_unauthorized(config, rejected)
    error = info.value
    assert isinstance(error.__cause__, OSError)
    assert error.status == 401 and error.error_class == "auth_source" and not error.retryable
    assert TOKEN not in str(error) and "<redacted>" in str(error)
    assert "failed to recover" in str(error) and "log in to ChatGPT again" in str(error)


async def test_recover_unauthorized_passes_cancellation_through(tmp_path: Path) -> None:
    class StuckSource(FailingSource):
        async def recover_unauthorized(self, rejected: ta.ChatGptAuthSnapshot) -> None:
            await trio.sleep_forever()

    config = ta.AgentConfig(auth=ta.ChatGptAuth(StuckSource()), workspace=tmp_path)
    with trio.CancelScope() as scope:
        scope.deadline = trio.current_time()  # already expired: the first checkpoint cancels
        await recover_unauthorized(config, ta.ChatGptAuthSnapshot(token=TOKEN))
    assert scope.cancelled_caught


async def test_recover_unauthorized_refuses_an_api_key(tmp_path: Path) -> None:
    config = ta.AgentConfig(auth="sk-test", workspace=tmp_path)
    with pytest.raises(TypeError, match="needs a config with ChatGPT auth"):
        await recover_unauthorized(config, ta.ChatGptAuthSnapshot(token=TOKEN))


# -- 401/403 and a refused connection: one class per cause on both transports -----------


def test_authentication_error_is_its_own_cause() -> None:
    """Neither a ConnectionFailed (WebSocket) nor an ApiError (HTTPS): one class for both."""
    assert ta.AuthenticationError.__bases__ == (ta.ResponsesError,)


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_credential_is_an_authentication_error_on_both_transports(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, status: int
) -> None:
    body = '{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}'

    async def script() -> None:
        if transport is ta.Transport.WEBSOCKET:
            for _ in range(2):  # the warmup's connection, then the first request's
                await (await server.accept_raw()).reject(status, body)
        else:
            await (await server.accept_http()).respond(status, body)

    failed, log = await fail_one_prompt(config_for(server, workspace, transport, "sk-test"), script)
    error = failed.responses_error
    assert isinstance(error, ta.AuthenticationError)
    assert error.status == status and error.code == "invalid_api_key" and not error.retryable
    prefix = "handshake" if transport is ta.Transport.WEBSOCKET else "https"
    assert error.error_class == f"{prefix}_rejected"
    assert f"HTTP {status}" in str(error) and "check the API key" in str(error)
    assert "model.attempt.retrying" not in log.kinds()
    if transport is ta.Transport.WEBSOCKET:
        assert len(log.payloads("model.connection.failed")) == 2
        assert len(log.payloads("model.warmup.failed")) == 1


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
async def test_a_refused_connection_is_connection_failed_on_both_transports(
    workspace: Path, transport: ta.Transport
) -> None:
    port = _closed_port()
    if transport is ta.Transport.WEBSOCKET:
        responses = ta.Responses(profile=ta.Profile.OPENAI,
                                 websocket_url=f"ws://127.0.0.1:{port}/v1/responses", max_attempts=1)
    else:
        responses = ta.Responses(profile=ta.Profile.OPENAI,
                                 transport=transport, api_base_url=f"http://127.0.0.1:{port}/v1", max_attempts=1)
    config = ta.AgentConfig(auth="sk-test", workspace=workspace, responses=responses)
    failed, log = await fail_one_prompt(config)
    error = failed.responses_error
    assert isinstance(error, ta.ConnectionFailed)
    assert error.retryable  # worth retrying (max_attempts=1 stops it here)
    assert error.failure_phase == "connect" and error.status is None
    assert "check that the server is reachable" in str(error)
    expected_class = "handshake_transport" if transport is ta.Transport.WEBSOCKET else "https_connect"
    assert error.error_class == expected_class
    (attempt_failed,) = log.payloads("model.attempt.failed")
    assert attempt_failed["error_class"] == expected_class


class RefreshingSource:
    """A ChatGPT source whose token is refreshed by ``recover_unauthorized``."""

    def __init__(self) -> None:
        self.token = "stale-token"
        self.recovered: list[str] = []

    def validate(self) -> None:
        return None

    async def snapshot(self) -> ta.ChatGptAuthSnapshot:
        await trio.lowlevel.checkpoint()
        return ta.ChatGptAuthSnapshot(token=self.token, account_id="account-1")

    async def recover_unauthorized(self, rejected: ta.ChatGptAuthSnapshot) -> None:
        await trio.lowlevel.checkpoint()
        self.recovered.append(rejected.token)
        self.token = "fresh-token"


async def test_a_websocket_401_asks_the_chatgpt_source_to_recover_once(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """SPEC sec. 6: a 401 asks the auth source to recover once, then retries -- on the
    WebSocket handshake as over HTTPS."""
    source = RefreshingSource()

    async def script() -> None:
        await (await server.accept_raw()).reject(401, '{"error":{"message":"expired","code":"token_expired"}}')
        conn = await server.accept()
        warmup = await conn.next_request()
        assert warmup["generate"] is False
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-1", "hello again")

    config = ta.AgentConfig(auth=ta.ChatGptAuth(source), workspace=workspace,
                            responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url))
    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("hi")).result()).final_message == "hello again"
    assert source.recovered == ["stale-token"]
    # (the rejected handshake is not recorded: it was refused before being accepted)
    assert [h.headers["authorization"] for h in server.handshakes] == ["Bearer fresh-token"]
    assert log.payloads("model.warmup.failed") == []
    assert len(log.payloads("model.connection.completed")) == 1
