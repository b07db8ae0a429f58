"""The pump delivers every thread event that is ready in one pass (issue 23, item 5):
what they produce reaches each client's writer together, so a client gets a burst in
one write (one ``send_batch``; on a WebSocket one socket write, ``test_ws_batches``)
instead of one write per event. Under 200 clients that, with the one-write batches,
took the server's CPU per turn from ~65 ms to ~17 ms (``benchmarks/serve_load``).

The burst here is a thread's unload: the manager emits its ``notLoaded`` status and
its close in one step, and every initialized client gets both (``thread/status/changed``
and ``thread/closed``, as codex sends them to every connection). The test records the
batches a watching client's channel was handed: each unload's two notifications are in
one batch. Before the pump drained ready events, the writer woke after the first of
them and, in about half the scheduler's orders, sent it alone: eight unloads all
coming out whole by chance is a 1-in-256 event (checked: it failed there).
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from trio_agent.testing import AppServerClient, LineChannel

from ._harness import app_server, start_thread
from ._schema import validate_server_message

UNLOADS = 8


class RecordingChannel:
    """A real channel that keeps every batch the server handed it."""

    def __init__(self, inner: LineChannel) -> None:
        self.inner = inner
        self.batches: list[list[str]] = []

    async def send(self, text: str) -> None:
        await self.send_batch([text])

    async def send_batch(self, texts: list[str]) -> None:
        self.batches.append(list(texts))
        await self.inner.send_batch(texts)

    async def receive(self) -> str:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()


def _batch_of(batches: list[list[str]], *needles: str) -> int:
    """The index of the batch holding the message that contains every needle."""
    return next(i for i, batch in enumerate(batches) for text in batch if all(n in text for n in needles))


async def test_the_notifications_of_thread_events_ready_together_go_to_a_client_in_one_batch(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        owner = await harness.client()
        client_end, server_end = trio.testing.memory_stream_pair()
        recorded = RecordingChannel(LineChannel(server_end))
        harness.nursery.start_soon(harness.app.serve_connection, recorded)
        watcher = AppServerClient(LineChannel(client_end), validate=validate_server_message)
        await watcher.initialize()
        threads = []
        for count in range(1, UNLOADS + 1):
            thread_id = (await start_thread(owner))["id"]
            await harness.model.wait_for_warmups(count)
            await owner.request("thread/unsubscribe", {"threadId": thread_id})
            closed = await watcher.read_notification("thread/closed", lambda p, t=thread_id: p["threadId"] == t)
            assert closed == {"threadId": thread_id}
            threads.append(thread_id)
        for thread_id in threads:
            status = _batch_of(recorded.batches, '"thread/status/changed"', '"notLoaded"', thread_id)
            close = _batch_of(recorded.batches, '"thread/closed"', thread_id)
            assert status == close, (thread_id, recorded.batches[status], recorded.batches[close])
        await watcher.aclose()
