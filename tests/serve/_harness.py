"""An in-process ``trio-agent serve`` for tests: the app server over an in-memory
stream pair, its threads talking to a scripted model on the in-memory seam, so that
under ``MockClock(autojump_threshold=0)`` every timing window is exact."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

import trio_agent as ta
from trio_agent._serve import OUTGOING_LIMIT, AppServer, open_app_server
from trio_agent._serve._channel import MAX_MESSAGE_BYTES
from trio_agent.testing import AppServerClient, FakeConnection, FakeResponsesServer, LineChannel

from ._schema import validate_server_message

TEST_DEADLINE = 600  # seconds of Trio time (virtual under MockClock): a hung test fails instead
Reply = Callable[[FakeConnection, dict[str, Any]], Awaitable[None]]
Json = dict[str, Any]


async def answer_done(conn: FakeConnection, request: Json) -> None:
    """``create_mock_responses_server_repeating_assistant("Done")``: a streamed message."""
    await send_message(conn, f"resp-{len(conn.requests)}", "Done")


class Model:
    """Answers every connection: warmups, then each request with ``reply``."""

    def __init__(self, server: FakeResponsesServer, reply: Reply) -> None:
        self.server = server
        self.reply = reply
        self.requests: list[Json] = []
        self.warmups = 0
        self._changed = trio.Event()

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                try:
                    conn = await self.server.accept()
                except trio.BrokenResourceError:  # an agent closed while connecting
                    continue
                nursery.start_soon(self._connection, conn)

    async def _connection(self, conn: FakeConnection) -> None:
        try:
            while True:
                request = await conn.next_request()
                if request.get("generate") is False:
                    await conn.send_warmup("resp-warmup")
                    self.warmups += 1
                    self._changed.set()
                    self._changed = trio.Event()
                    continue
                self.requests.append(request)
                self._changed.set()
                self._changed = trio.Event()
                await self.reply(conn, request)
        except Exception:  # the agent closed this socket
            return

    async def wait_for_warmups(self, count: int) -> None:
        """Until ``count`` warmups were answered (an agent closed mid-handshake is the
        runtime's to handle; tests that unload a fresh thread wait for its warmup)."""
        while self.warmups < count:
            await self._changed.wait()

    async def wait_for_request_count(self, count: int) -> None:
        while len(self.requests) < count:
            await self._changed.wait()


@attrs.define
class Harness:
    app: AppServer
    model: Model
    nursery: trio.Nursery
    workspace: Path
    home: Path
    served: dict[AppServerClient, trio.Event] = attrs.field(factory=dict)

    async def connect(self, *, max_message_bytes: int = MAX_MESSAGE_BYTES, lockstep: bool = False) -> AppServerClient:
        """A new client connection (not yet initialized). ``lockstep``: the server's writes
        wait until the client reads them (a client that stops reading stalls them)."""
        pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
        client_end, server_end = pair()
        client = AppServerClient(LineChannel(client_end), validate=validate_server_message)
        done = self.served[client] = trio.Event()

        async def serve() -> None:
            try:
                await self.app.serve_connection(LineChannel(server_end, max_message_bytes=max_message_bytes))
            finally:
                done.set()

        self.nursery.start_soon(serve)
        return client

    async def client(self, *, max_message_bytes: int = MAX_MESSAGE_BYTES, lockstep: bool = False) -> AppServerClient:
        """A new initialized client."""
        client = await self.connect(max_message_bytes=max_message_bytes, lockstep=lockstep)
        await client.initialize()
        return client


@asynccontextmanager
async def app_server(tmp_path: Path, reply: Reply = answer_done, *, unload_delay: float = 60.0,
                     max_attempts: int | None = None, outgoing_limit: int = OUTGOING_LIMIT,
                     sandbox: ta.SandboxMode | None = ta.SandboxMode.DANGER_FULL_ACCESS,
                     approval: ta.Approvals | None = None, multi_agent: bool = False,
                     model_provider: str = "openai") -> AsyncIterator[Harness]:
    server = FakeResponsesServer.in_memory()
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    home = tmp_path / "home"
    # The seeds' MockResponsesConfig::with_sandbox_mode("danger-full-access"): threads that ask
    # for nothing run unconfined; tests of sandboxes ask for one (or pass ``sandbox=``).
    config = ta.AgentConfig(
        auth="test-key", workspace=workspace, thinking=ta.Thinking.LOW, sandbox=sandbox,
        approval=approval or ta.Approvals(),
        responses=ta.Responses(profile=ta.Profile.OPENAI,
                               websocket_url=server.url, dialer=server.dial, max_attempts=max_attempts),
    )
    model = Model(server, reply)
    with trio.fail_after(TEST_DEADLINE):
        async with _running(server, model, config, home, workspace, unload_delay, outgoing_limit,
                            multi_agent, model_provider) as harness:
            yield harness


@asynccontextmanager
async def _running(server: FakeResponsesServer, model: Model, config: ta.AgentConfig, home: Path, workspace: Path,
                   unload_delay: float, outgoing_limit: int, multi_agent: bool,
                   model_provider: str) -> AsyncIterator[Harness]:
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        nursery.start_soon(model.serve)
        async with open_app_server(config, home=home, unload_delay=unload_delay, outgoing_limit=outgoing_limit,
                                   multi_agent=multi_agent, model_provider=model_provider) as app:
            yield Harness(app, model, nursery, workspace, home)
        nursery.cancel_scope.cancel()


async def start_thread(client: AppServerClient, **params: Any) -> Json:
    result: Json = await client.request("thread/start", {"model": "mock-model", **params})
    return result["thread"]  # type: ignore[no-any-return]


def text_input(text: str) -> list[Json]:
    return [{"type": "text", "text": text, "text_elements": []}]


async def run_turn(client: AppServerClient, thread_id: str, text: str) -> Json:
    """``start_turn_and_wait_for_completion``: the ``turn/completed`` params."""
    result = await client.request("turn/start", {"threadId": thread_id, "input": text_input(text)})
    turn_id = result["turn"]["id"]
    return await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)


async def assert_quiet(client: AppServerClient, method: str, seconds: float) -> None:
    """``assert!(timeout(seconds, read_stream_until_notification_message(method)).await.is_err())``."""
    with trio.move_on_after(seconds) as window:
        params = await client.read_notification(method)
    assert window.cancelled_caught, f"{method} arrived within {seconds} s: {params}"


async def send_message(conn: FakeConnection, response_id: str, text: str, item_id: str | None = None) -> None:
    """A streamed assistant message (added, delta, done), then ``response.completed``."""
    from trio_agent.testing import frames

    done = await conn.send_assistant_output(0, item_id or f"msg-{response_id}", "final_answer", text)
    await conn.send(frames.completed(response_id, [done]))
