"""Fault matrix, class 1: response isolation (issue 8).

A response that ends without its own terminal frame fails its turn with a clear
error, and its connection is not read again: the next turn gets its own answer and
id, never the dead response's leftovers. Frames naming another response are reported
(``api.warning``) and ignored, never taken as the answer or committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, scripted
from ._peer import TRANSPORTS, Peer

LEFTOVER = frames.completed("resp-dead", [frames.assistant_message("LEFTOVER of the dead response")])

# (name, frames that break the response, error_class of the failed turn, WebSocket only)
HOSTILE: list[tuple[str, list[Any], str, bool]] = [
    ("invalid_json", ['{"type": "response.created"'], "invalid_json", False),
    ("json_array", ["[1, 2, 3]"], "invalid_payload", False),
    ("json_number", ["42"], "invalid_payload", False),
    ("no_type", [{"response": {"id": "resp-x"}}], "invalid_payload", False),
    ("item_without_item", [frames.response_created("resp-x"), {"type": "response.output_item.done"}],
     "invalid_payload", False),
    ("output_not_a_list", [{"type": "response.completed", "response": {"id": "resp-x", "output": "text"}}],
     "invalid_payload", False),
    ("binary_frame", [frames.response_created("resp-x"), b"\x00\x01binary"], "unexpected_binary", True),
    # Issue 21: nesting that would raise RecursionError in the reader (it escaped the
    # agent before), and an item too deep to be kept in a rollout (committed before,
    # then refused when the session was loaded again).
    ("nested_past_the_reader", [frames.response_created("resp-x"),
                                '{"type": "response.output_item.done", "item": ' + "[" * 100_000 + "]" * 100_000 + "}"],
     "invalid_json", False),
    ("item_too_deep_to_keep", [frames.response_created("resp-x"), {
        "type": "response.output_item.done", "output_index": 0,
        "item": {**frames.assistant_message("deep"), "extra": json.loads("[" * 150 + "]" * 150)}}],
     "invalid_payload", False),
]


def answer(items: list[dict[str, Any]]) -> list[str]:
    return [part.get("text", "") for item in items for part in item.get("content") or [] if isinstance(part, dict)]


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
@pytest.mark.parametrize(("name", "bad", "error_class", "websocket_only"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_a_broken_response_fails_its_turn_and_never_leaks_into_the_next(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport,
    name: str, bad: list[Any], error_class: str, websocket_only: bool,
) -> None:
    if websocket_only and transport is ta.Transport.HTTPS:
        bad = [frames.response_created("resp-x"), "\x00 not json"]  # the HTTPS cell: text that is not JSON
        error_class = "invalid_json"
    peer = Peer(server, transport)
    second_request: list[dict[str, Any]] = []

    async def script() -> None:
        await peer.next_request()
        await peer.send(bad)
        if peer.websocket:
            # The dead response goes on talking on its socket; nobody may read it.
            assert peer.conn is not None
            await peer.conn.send(LEFTOVER)
            second_request.append(await peer.next_request(new_connection=True))
        else:
            second_request.append(await peer.next_request())
        await peer.send([frames.completed("resp-2", [frames.assistant_message("fresh answer")])])

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(peer.config(workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        with pytest.raises(ta.TurnFailed) as failed:
            await (await agent.prompt("first")).result()
        assert failed.value.responses_error is not None
        assert failed.value.responses_error.error_class == error_class
        result = await (await agent.prompt("second")).result()
    assert (result.final_message, result.response_id) == ("fresh answer", "resp-2")
    assert "LEFTOVER" not in json.dumps(result.snapshot().history)
    (body,) = second_request
    assert "previous_response_id" not in body  # a new connection: the chain is gone too
    assert answer(body["input"])[-1] == "second"
    assert [p["status"] for p in log.payloads("run.failed") + log.payloads("run.completed")] == [
        "failed", "completed"]
    if peer.websocket:
        purposes = [p["purpose"] for p in log.payloads("model.connection.started")]
        assert purposes == ["initial", "reconnect"]


async def test_an_idle_timeout_on_the_last_attempt_drops_the_socket(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    peer = Peer(server, ta.Transport.WEBSOCKET)
    late: list[dict[str, Any]] = []

    async def script() -> None:
        await peer.next_request()
        await trio.sleep(301)  # past the 300 s idle timeout
        assert peer.conn is not None
        dead = peer.conn
        try:
            await dead.send(LEFTOVER)  # the late reply, if the socket were still read
        except Exception:  # the client already closed it
            pass
        late.append(await peer.next_request(new_connection=True))
        await peer.send([frames.completed("resp-2", [frames.assistant_message("fresh answer")])])

    config = peer.config(workspace, responses={"max_attempts": 1})
    async with scripted(script, 400), ta.open_agent(config) as agent:
        with pytest.raises(ta.TurnFailed) as failed:
            await (await agent.prompt("first")).result()
        assert isinstance(failed.value.responses_error, ta.ResponseTimeout)
        result = await (await agent.prompt("second")).result()
    assert (result.final_message, result.response_id) == ("fresh answer", "resp-2")
    assert "previous_response_id" not in late[0]


async def test_a_duplicated_completion_is_reported_and_ignored(server: FakeResponsesServer, workspace: Path) -> None:
    peer = Peer(server, ta.Transport.WEBSOCKET)

    async def script() -> None:
        await peer.next_request()
        first = frames.completed("resp-1", [frames.assistant_message("first answer")])
        await peer.send([first, first])  # the server repeats its terminal frame
        second = await peer.next_request()
        assert second["previous_response_id"] == "resp-1"
        await peer.send([frames.completed("resp-2", [frames.assistant_message("second answer")])])

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(peer.config(workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("one")).result()).final_message == "first answer"
        second = await (await agent.prompt("two")).result()
    assert (second.final_message, second.response_id) == ("second answer", "resp-2")
    history = second.snapshot().history
    assert answer(history).count("first answer") == 1  # committed once
    (warning,) = log.payloads("api.warning")
    assert warning["code"] == "foreign_response_frame"
    assert (warning["response_id"], warning["frame"]) == ("resp-1", "ResponseCompleted")
    assert "ignored" in warning["message"]
    assert peer.connections == 1  # an ignored duplicate does not cost the socket


async def test_frames_of_another_response_mid_stream_are_ignored(
    server: FakeResponsesServer, workspace: Path
) -> None:
    peer = Peer(server, ta.Transport.WEBSOCKET)

    async def script() -> None:
        await peer.next_request()
        await peer.send([
            frames.response_created("resp-live"),
            frames.completed("resp-other", [frames.assistant_message("not mine")]),
            frames.completed("resp-live", [frames.assistant_message("mine")]),
        ])

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(peer.config(workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        result = await (await agent.prompt("go")).result()
    assert (result.final_message, result.response_id) == ("mine", "resp-live")
    assert "not mine" not in json.dumps(result.snapshot().history)
    (warning,) = log.payloads("api.warning")
    assert (warning["response_id"], warning["live_response_id"]) == ("resp-other", "resp-live")
