"""``Connection.flush_now`` (issue 30, item 3): a queue of at most ``WRITE_BATCH``
messages is handed to the channel whole and taken off the queue at once (a broadcast puts
a message of every client's turn into every connection's queue); a longer one goes in
batches of ``WRITE_BATCH``, in order, the rest left for the woken writer. Frames of a
batch are the messages' frames in order, a shared message's built once.
"""

from __future__ import annotations

from typing import Any, cast

import trio

from trio_agent._serve._connection import WRITE_BATCH, Connection
from trio_agent._serve._jsonrpc import SharedText
from trio_agent._serve._ws_writes import text_frame, text_frames


class _Now:
    """A channel that writes now (``SendsNow``), recording each batch."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.pending = False

    def send_now(self, texts: list[str]) -> bool:
        self.batches.append(list(texts))
        return True

    async def send(self, text: str) -> None: ...
    async def send_batch(self, texts: list[str]) -> None: ...
    async def receive(self) -> str: return ""
    async def aclose(self) -> None: ...


def _parked(count: int) -> tuple[Connection, _Now, trio.Event]:
    channel = _Now()
    conn = Connection(cast(Any, object()), channel)
    wake = conn._writer_wake = trio.Event()  # its writer waits for a message
    conn._outbox.extend(f"m{index}" for index in range(count))
    return conn, channel, wake


def test_a_queue_within_one_batch_is_written_whole_and_emptied() -> None:
    for count in (1, 3, WRITE_BATCH):
        conn, channel, wake = _parked(count)
        conn.flush_now()
        assert channel.batches == [[f"m{index}" for index in range(count)]]
        assert not conn._outbox and not wake.is_set()  # nothing left: the writer sleeps on


def test_a_longer_queue_goes_in_order_and_wakes_the_writer_for_the_rest() -> None:
    conn, channel, wake = _parked(WRITE_BATCH + 5)
    conn.flush_now()
    assert channel.batches == [[f"m{index}" for index in range(WRITE_BATCH)]]
    assert list(conn._outbox) == [f"m{index}" for index in range(WRITE_BATCH, WRITE_BATCH + 5)]
    assert wake.is_set()


def test_frames_are_each_messages_in_order_a_shared_ones_built_once() -> None:
    shared = SharedText('{"method":"thread/status/changed"}')
    texts = ["a", shared, "é" * 200, shared, "x" * 70_000]
    assert text_frames(texts) == b"".join(text_frame(str(text)) for text in texts)
    assert shared.frame is not None and text_frames([shared]) is not None
    frame = shared.frame
    text_frames([shared])
    assert shared.frame is frame
