"""``wss://`` and ``https://`` against the fake server with a private CA (trustme)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
import trio
import trustme

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import scripted, warm


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def tls_server(nursery: trio.Nursery, ca: trustme.CA) -> FakeResponsesServer:
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    server = FakeResponsesServer(ssl_context=server_context)
    await nursery.start(server.serve)
    return server


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def test_websocket_over_tls(tls_server: FakeResponsesServer, ca: trustme.CA, workspace: Path) -> None:
    assert tls_server.url.startswith("wss://")

    async def script() -> None:
        conn = await warm(tls_server)
        await conn.next_request()
        await conn.send_final("resp-1", "secure hello")

    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=tls_server.url, ssl_context=client_context(ca))
    config = ta.AgentConfig(auth="k", workspace=workspace, responses=responses, session_id="model-test",
                            thinking=ta.Thinking.LOW)
    async with scripted(script):
        async with ta.open_agent(config) as agent:
            assert (await (await agent.prompt("hi")).result()).final_message == "secure hello"


async def test_untrusted_certificates_fail_the_connection_clearly(
    tls_server: FakeResponsesServer, workspace: Path
) -> None:
    refused = 0

    async def server_side() -> None:
        # The fake server's TLS handshake runs when it accepts; the client rejects it.
        nonlocal refused
        while True:
            with pytest.raises(trio.BrokenResourceError):
                await tls_server.accept()
            refused += 1

    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=tls_server.url, max_attempts=1)
    config = ta.AgentConfig(auth="k", workspace=workspace, responses=responses)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            async with ta.open_agent(config) as agent:
                with pytest.raises(ta.TurnFailed, match=r"CERTIFICATE_VERIFY_FAILED") as info:
                    await (await agent.prompt("hi")).result()
            nursery.cancel_scope.cancel()
    error = info.value.responses_error
    assert isinstance(error, ta.ConnectionFailed)
    assert error.error_class == "handshake_tls" and not error.retryable
    assert refused == 2  # the warmup's connection, then the first request's


async def test_https_over_tls(tls_server: FakeResponsesServer, ca: trustme.CA, workspace: Path) -> None:
    assert tls_server.http_base_url.startswith("https://")

    async def script() -> None:
        request = await tls_server.accept_http()
        await request.send_final("resp-1", "secure https")

    with trio.fail_after(10):
        async with httpx.AsyncClient(verify=client_context(ca)) as client:
            responses = ta.Responses(
                profile=ta.Profile.OPENAI,
                transport=ta.Transport.HTTPS, api_base_url=tls_server.http_base_url, http_client=client
            )
            config = ta.AgentConfig(auth="k", workspace=workspace, responses=responses)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                async with ta.open_agent(config) as agent:
                    assert (await (await agent.prompt("hi")).result()).final_message == "secure https"


async def test_https_with_an_untrusted_certificate_fails_at_once_without_retries(
    tls_server: FakeResponsesServer, workspace: Path
) -> None:
    async def server_side() -> None:
        while True:
            raw = await tls_server.accept_raw()
            with pytest.raises(trio.BrokenResourceError):
                await raw.stream.do_handshake()  # type: ignore[attr-defined]

    responses = ta.Responses(profile=ta.Profile.OPENAI,
                             transport=ta.Transport.HTTPS, api_base_url=tls_server.http_base_url)
    config = ta.AgentConfig(auth="k", workspace=workspace, responses=responses)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            async with ta.open_agent(config) as agent:
                with pytest.raises(ta.TurnFailed, match="CERTIFICATE_VERIFY_FAILED") as info:
                    await (await agent.prompt("hi")).result()
            nursery.cancel_scope.cancel()
    error = info.value.responses_error
    assert isinstance(error, ta.ConnectionFailed)
    assert error.error_class == "https_tls" and not error.retryable
