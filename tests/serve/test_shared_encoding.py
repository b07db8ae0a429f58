"""A notification is encoded once, whatever the number of its recipients (issue 30,
item 3): the server hands every recipient's channel the same ``SharedText`` object, and
its wire bytes (a stdio line here, a WebSocket frame in ``test_ws_batches``) are built
by the first connection that writes it and reused by the others. Who receives what is
codex's split (``_server``): a thread's subscribers get its turn and item
notifications, every initialized client its ``thread/started`` and
``thread/status/changed``; a bystander subscribed to nothing gets none of the turn.

Checked without the change: each connection's channel got its own ``str`` (equal,
not identical) and no cached line, and the identity assertions below failed.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from trio_agent._serve._jsonrpc import SharedText
from trio_agent._serve._ws_writes import text_frame, text_frames
from trio_agent.testing import AppServerClient, LineChannel

from ._harness import Harness, app_server, run_turn, start_thread
from ._schema import validate_server_message
from .test_pump_bursts import RecordingChannel

TURN_METHODS = ("turn/started", "item/started", "item/completed", "turn/completed")


async def _recorded_client(harness: Harness) -> tuple[AppServerClient, RecordingChannel]:
    client_end, server_end = trio.testing.memory_stream_pair()
    recorded = RecordingChannel(LineChannel(server_end))
    harness.nursery.start_soon(harness.app.serve_connection, recorded)
    client = AppServerClient(LineChannel(client_end), validate=validate_server_message)
    await client.initialize()
    return client, recorded


def _sent(recorded: RecordingChannel, method: str) -> list[str]:
    return [text for batch in recorded.batches for text in batch if f'"method":"{method}"' in text]


async def test_subscribers_and_a_bystander_get_the_same_encoded_notification_objects(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        owner, owner_sent = await _recorded_client(harness)
        follower, follower_sent = await _recorded_client(harness)
        bystander, bystander_sent = await _recorded_client(harness)
        thread_id = (await start_thread(owner))["id"]
        await follower.request("thread/resume", {"threadId": thread_id})
        await run_turn(owner, thread_id, "hello")
        await follower.read_notification("turn/completed")
        await bystander.read_notification("thread/status/changed", lambda p: p["status"]["type"] == "idle")

        # Who gets what: both subscribers the turn, the bystander nothing of it.
        for method in TURN_METHODS:
            assert _sent(owner_sent, method) and len(_sent(owner_sent, method)) == len(_sent(follower_sent, method))
            assert _sent(bystander_sent, method) == [], method
        # Encoded once: the subscribers' turn notifications are the same objects, their
        # line built once.
        for method in TURN_METHODS:
            for mine, theirs in zip(_sent(owner_sent, method), _sent(follower_sent, method), strict=True):
                assert mine is theirs and type(mine) is SharedText
                assert mine.line == (mine + "\n").encode()
        # The thread list's notifications go to everyone, as one object.
        owner_status = _sent(owner_sent, "thread/status/changed")
        assert owner_status
        bystander_status = _sent(bystander_sent, "thread/status/changed")
        assert [id(text) for text in bystander_status[-len(owner_status):]] == [id(text) for text in owner_status]
        # The thread list's notifications reach the bystander; the response to the owner's
        # own request is its alone (a plain str).
        assert _sent(bystander_sent, "thread/started")
        for client in (owner, follower, bystander):
            await client.aclose()


def test_a_shared_message_is_framed_once_for_every_websocket() -> None:
    text = SharedText('{"jsonrpc":"2.0","method":"thread/status/changed","params":{"x":"é"}}')
    first = text_frame(text)
    assert text_frame(text) is first
    assert text_frames([text, text]) == first * 2
    plain = str(text)
    assert text_frame(plain) == first and text_frame(plain) is not first
    long_text = SharedText("x" * 70_000)
    assert text_frame(long_text)[:2] == b"\x81\x7f" and text_frame(long_text) is text_frame(long_text)
