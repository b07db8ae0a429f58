"""The connection's reader serves a request itself when nothing is ahead of it and its
handler waits on nothing slow (``ConnectionHost.serves_inline``: a warm ``turn/start``),
instead of handing it to the dispatcher task -- one task hop fewer per request (issue 30,
item 3). What must not change: requests are served one at a time, in the client's order,
each answer in that order; a reply to a server request is routed while a slow request is
served; any other request goes through the dispatcher.

Checked without the change: the quick request is served by ``_dispatch_loop``.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import trio
import trio.testing

from trio_agent._serve._channel import LineChannel
from trio_agent._serve._connection import Connection, PendingReply, Reply
from trio_agent._serve._jsonrpc import Notification, Request
from trio_agent._serve._router import serves_inline


class Host:
    """Serves ``quick`` inline (said by ``serves_inline``) and ``slow`` once ``release`` is set."""

    def __init__(self) -> None:
        self.served: list[tuple[str, str]] = []  # (method, the serving task's function)
        self.notified: list[tuple[str, str]] = []
        self.release = trio.Event()

    async def handle_request(self, conn: Connection, request: Request) -> Reply:
        self.served.append((request.method, trio.lowlevel.current_task().name.rsplit(".", 1)[-1]))
        if request.method == "slow":
            await self.release.wait()
        await trio.lowlevel.checkpoint()
        return Reply({"method": request.method})

    def serves_inline(self, conn: Connection, request: Request) -> bool:
        return request.method == "quick"

    def handle_notification(self, conn: Connection, notification: Notification) -> None:
        self.notified.append((notification.method, trio.lowlevel.current_task().name.rsplit(".", 1)[-1]))

    def connection_closed(self, conn: Connection) -> None:
        pass

    def now_ms(self) -> int:
        return 0


class Client:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.channel = LineChannel(stream)

    async def send(self, message: dict[str, Any]) -> None:
        await self.channel.send(json.dumps(message))

    async def receive(self) -> dict[str, Any]:
        """The next message, without its ``jsonrpc`` member."""
        message: dict[str, Any] = json.loads(await self.channel.receive())
        message.pop("jsonrpc", None)
        return message


async def connected(nursery: trio.Nursery, host: Host) -> tuple[Connection, Client]:
    server_end, client_end = trio.testing.memory_stream_pair()
    conn = Connection(host, LineChannel(server_end))
    nursery.start_soon(conn.run)
    return conn, Client(client_end)


async def test_a_quick_request_with_nothing_ahead_is_served_by_the_reader() -> None:
    host = Host()
    async with trio.open_nursery() as nursery:
        _conn, client = await connected(nursery, host)
        await client.send({"method": "initialized"})
        await client.send({"id": 1, "method": "quick"})
        assert await client.receive() == {"id": 1, "result": {"method": "quick"}}
        await client.send({"id": 2, "method": "other"})
        assert await client.receive() == {"id": 2, "result": {"method": "other"}}
        assert host.served == [("quick", "_read_then_drain"), ("other", "_dispatch_loop")]
        assert host.notified == [("initialized", "_read_then_drain")]
        nursery.cancel_scope.cancel()


async def test_a_quick_request_behind_a_slow_one_waits_its_turn() -> None:
    host = Host()
    async with trio.open_nursery() as nursery:
        conn, client = await connected(nursery, host)
        pending = PendingReply("thread")
        conn.ask("item/tool/call", {}, pending)
        question = await client.receive()
        assert pending.asked == 1
        await client.send({"id": 1, "method": "slow"})
        await client.send({"id": 2, "method": "quick"})
        await client.send({"method": "initialized"})
        await client.send({"id": question["id"], "result": {"ok": True}})  # routed while slow is served
        await trio.testing.wait_all_tasks_blocked()
        assert pending.asked == 0  # the answer was routed (the connection no longer waits for it)
        assert host.served == [("slow", "_dispatch_loop")] and host.notified == []
        assert await pending.wait() == {"ok": True}
        host.release.set()
        assert [await client.receive() for _ in range(2)] == [
            {"id": 1, "result": {"method": "slow"}}, {"id": 2, "result": {"method": "quick"}}]
        await trio.testing.wait_all_tasks_blocked()
        assert host.served == [("slow", "_dispatch_loop"), ("quick", "_dispatch_loop")]
        assert host.notified == [("initialized", "_dispatch_loop")]
        await client.send({"id": 3, "method": "quick"})  # nothing ahead any more: the reader again
        assert await client.receive() == {"id": 3, "result": {"method": "quick"}}
        assert host.served[-1] == ("quick", "_read_then_drain")
        nursery.cancel_scope.cancel()


def test_the_server_serves_inline_only_a_warm_turn_that_reads_no_file() -> None:
    """``serves_inline``: ``turn/start``/``turn/steer`` of an initialized client on a
    loaded thread with no ``localImage`` (read from disk); anything else -- an unloaded
    thread (located on disk first), another method -- goes to the dispatcher."""
    server = cast(Any, SimpleNamespace(state=lambda thread_id: object() if thread_id == "loaded" else None))
    conn = cast(Any, SimpleNamespace(initialized=True))
    text = [{"type": "text", "text": "hi"}, {"type": "image", "url": "https://x/y.png"}]

    def inline(method: str, params: Any, *, initialized: bool = True) -> bool:
        conn.initialized = initialized
        return serves_inline(server, conn, Request(1, method, params))

    assert inline("turn/start", {"threadId": "loaded", "input": text})
    assert inline("turn/steer", {"threadId": "loaded", "input": text, "expectedTurnId": "t"})
    assert not inline("turn/start", {"threadId": "loaded", "input": [*text, {"type": "localImage", "path": "/a"}]})
    assert not inline("turn/start", {"threadId": "unloaded", "input": text})
    assert not inline("turn/start", {"threadId": "loaded", "input": text}, initialized=False)
    assert not inline("turn/start", ["loaded"])
    assert not inline("thread/resume", {"threadId": "loaded"})
