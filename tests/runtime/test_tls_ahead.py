"""The default TLS contexts are loaded once per process, beside start-up (``_transport._tls``).

Without ``_tls`` (the WebSocket transport calling ``ssl.create_default_context()`` in
``_dial``) every socket loads the CA bundle on its own path to the handshake, and the
first of them only once the socket is connected: the first test sees no load at
startup, the second one load per socket.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._transport import _tls

LOADED = threading.Event()  # set by a load, in the worker thread that ran it


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A fresh cache, and the kinds loaded from now on (a cheap context, no CA bundle)."""
    seen: list[str] = []

    def create(kind: _tls.Kind) -> ssl.SSLContext:
        seen.append(kind)
        LOADED.set()
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)

    LOADED.clear()

    monkeypatch.setattr(_tls, "_contexts", {})
    monkeypatch.setattr(_tls, "_create", create)
    return seen


async def test_concurrent_askers_share_one_load(loads: list[str]) -> None:
    contexts: list[ssl.SSLContext] = []

    async def ask() -> None:
        contexts.append(await _tls.tls_context("websocket"))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(ask)
    assert loads == ["websocket"]
    assert contexts[0] is contexts[1] is contexts[2] is _tls.tls_context_now("websocket")
    assert _tls.tls_context_now("https") is not contexts[0] and loads == ["websocket", "https"]


Dialer = Callable[[str, int], Awaitable[trio.abc.Stream]]


def _config(workspace: Path, url: str, dialer: Dialer, ssl_context: ssl.SSLContext | None = None) -> ta.AgentConfig:
    return ta.AgentConfig(auth="test-key", workspace=workspace, session_id="tls-test", responses=ta.Responses(
        profile=ta.Profile.OPENAI, websocket_url=url, dialer=dialer, max_attempts=1, ssl_context=ssl_context))


async def _never(host: str, port: int) -> trio.abc.Stream:
    """A dial that never connects: nothing but the start-up prefetch loads a context."""
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def _closed(host: str, port: int) -> trio.abc.Stream:
    """A dial whose peer hangs up at once: the TLS handshake fails, the attempt fails."""
    ours, theirs = trio.testing.memory_stream_pair()
    await theirs.aclose()
    return ours


WSS = "wss://api.example.test/v1/responses"


async def test_a_wss_agent_starts_loading_the_context_at_startup(loads: list[str], workspace: Path) -> None:
    async with ta.open_agent(_config(workspace, WSS, _never)):
        # the warmup is dialling, forever: only the prefetch can load it
        assert await trio.to_thread.run_sync(LOADED.wait, 10)
        assert loads == ["websocket"]


async def test_sockets_share_the_loaded_context(loads: list[str], workspace: Path) -> None:
    with trio.fail_after(10):
        async with ta.open_agent(_config(workspace, WSS, _closed), warmup=False) as agent:
            for _ in range(2):  # each prompt dials a socket of its own (and fails)
                with pytest.raises(ta.TurnFailed):
                    await (await agent.prompt("hello")).result()
    assert loads == ["websocket"]


async def test_an_own_context_or_a_plain_url_loads_nothing(loads: list[str], workspace: Path) -> None:
    own = _config(workspace, WSS, _never, ssl_context=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    plain = _config(workspace, "ws://api.example.test/v1/responses", _never)
    for config in (own, plain):
        async with ta.open_agent(config):
            await trio.testing.wait_all_tasks_blocked()
    assert loads == []


async def test_a_plain_http_endpoint_makes_no_tls_context(loads: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # an agent's own HTTPS client dials (the early dial's, or Responses.dialer) to an
    # http:// base: no context is made at all (the process's first costs ~1.3 ms)
    from trio_agent._transport import https

    made: list[object] = []
    real = ssl.SSLContext

    class Counted(real):
        def __new__(cls, *args: object, **kwargs: object) -> Counted:
            made.append(args)
            return real.__new__(cls, *args, **kwargs)

    monkeypatch.setattr(ssl, "SSLContext", Counted)
    https._no_tls_context.cache_clear()
    await https.HttpsTransport("http://api.example.test/v1", dialer=_never).aclose()
    assert made == [] and loads == []
    # the controls: without a dialer httpx needs one to verify with (a cheap one, no CA
    # bundle); an https:// base gets the process's default
    await https.HttpsTransport("http://api.example.test/v1").aclose()
    assert len(made) == 1 and loads == []
    await https.HttpsTransport("https://api.example.test/v1", dialer=_never).aclose()
    assert loads == ["https"]
    https._no_tls_context.cache_clear()  # not the counted class's, for later tests
