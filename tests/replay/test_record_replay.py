"""Record a live session (tool call, steer, reconnect) over WebSocket and HTTPS, replay
it, and detect a deliberate behaviour change with a readable diff (issue 15)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

import trio_agent as ta
from trio_agent._cassette.format import frame_json
from trio_agent.testing import Cassette, FakeResponsesServer, ReplayedTurn, ReplayMismatch, frames, replay

from ..conftest import EventLog
from ._session import ANSWER, PROMPT, SESSION_ID, STEER, add_tool, comparable, config, record

TRANSPORTS = [pytest.param(ta.Transport.WEBSOCKET, id="websocket"), pytest.param(ta.Transport.HTTPS, id="https")]


def kinds(cassette: Cassette) -> list[str]:
    return [obs.kind for obs in cassette.observations]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_recorded_session_holds_every_observation_in_order(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport
) -> None:
    recording = await record(server, transport, workspace, tmp_path / "session.jsonl")
    assert recording.result.final_message == ANSWER
    cassette = Cassette.load(recording.path)
    header = cassette.header
    assert (header.version, header.transports, header.session_id) == (2, (transport.value,), SESSION_ID)
    assert header.workspace == str(workspace.resolve())
    observed = kinds(cassette)
    prompt, steer = cassette.inputs()
    assert (prompt.kind, prompt.data["text"], prompt.data["turn"]) == ("input.prompt", PROMPT, 1)
    assert (steer.kind, steer.data["text"], steer.data["interrupt"]) == ("input.steer", STEER, False)
    (end,) = cassette.turn_ends()
    assert (end.data["status"], end.data["final_message"]) == ("completed", ANSWER)
    times = [obs.t for obs in cassette.observations]
    assert times == sorted(times)
    if transport is ta.Transport.WEBSOCKET:
        opens = [o for o in cassette.observations if o.kind == "ws.open"]
        assert [o.data["purpose"] for o in opens] == ["initial", "reconnect"]
        assert opens[0].data["url"] == server.url
        closes = [o.data for o in cassette.observations if o.kind == "ws.close"]
        assert closes == [{"conn": 1, "by": "server", "code": 1006, "reason": None},
                          {"conn": 2, "by": "client", "code": None, "reason": None}]
        assert observed.count("ws.send") == 4  # warmup, prompt, continuation, the replay after reconnecting
        # The steer was given after the delta arrived, before the response completed.
        delta = next(o for o in cassette.observations if o.kind == "ws.recv" and "output_text.delta" in str(o.data))
        completed = next(o for o in cassette.observations if o.kind == "ws.recv" and "resp-1" in str(o.data)
                         and "response.completed" in str(o.data))
        assert delta.line < steer.line < completed.line
    else:
        requests = [o for o in cassette.observations if o.kind == "http.request"]
        assert len(requests) == 3 and all(o.data["method"] == "POST" for o in requests)
        assert requests[0].data["url"] == server.http_base_url + "/responses"
        assert requests[0].data["body"]["input"][-1]["content"][0]["text"] == PROMPT
        ends = [o.data for o in cassette.observations if o.kind == "http.end"]
        assert [e["how"] for e in ends] == ["eof", "error", "eof"]
        assert ends[1]["error_class"] == "https_transport"
        events = [o for o in cassette.observations if o.kind == "sse.event"]
        assert events[0].data["json"] == frame_json(events[0]) and "data" not in events[0].data  # an object (v2)
        assert (frame_json(events[0]) or {})["type"] == "response.created"
    assert observed[-1] in ("ws.close", "turn.end", "http.end")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_replay_behaves_as_recorded(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport
) -> None:
    recording = await record(server, transport, workspace, tmp_path / "session.jsonl")
    with trio.fail_after(20):
        result = await replay(recording.path, workspace=workspace, tools=add_tool())
    result.check()
    assert result.ok
    assert result.turns == (ReplayedTurn(1, "completed", ANSWER),)
    cassette = Cassette.load(recording.path)
    assert result.requests == cassette.client_requests()
    assert result.connections == len(cassette.connections())
    # The same events, in the same order: the steer joined the same request, the dropped
    # connection was dropped again and the agent recovered from it the same way.
    assert comparable(result.events) == comparable(recording.log.events)
    purposes = [e.payload["purpose"] for e in result.events if e.kind is ta.EventKind.MODEL_CONNECTION_STARTED]
    retries = [e.payload["error_class"] for e in result.events if e.kind is ta.EventKind.MODEL_ATTEMPT_RETRYING]
    if transport is ta.Transport.WEBSOCKET:
        assert (purposes, retries) == (["initial", "reconnect"], ["receive_transport"])
    else:
        assert retries == ["https_transport"]
    assert result.summary().startswith("replay ok: 1 turn(s)")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_changed_tool_output_is_a_mismatch_with_a_readable_diff(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport
) -> None:
    recording = await record(server, transport, workspace, tmp_path / "session.jsonl")
    with trio.fail_after(20):
        result = await replay(recording.path, workspace=workspace, tools=add_tool(offset=1))  # 2 + 3 = 6 now
    assert not result.ok
    mismatch = result.mismatch
    assert isinstance(mismatch, ReplayMismatch)
    cassette = Cassette.load(recording.path)
    continuation = [o for o in cassette.observations if o.kind in ("ws.send", "http.request")][
        2 if transport is ta.Transport.WEBSOCKET else 1]
    assert mismatch.line == continuation.line
    assert f"replay mismatch at cassette line {continuation.line}:" in mismatch.headline
    assert f"connection {continuation.conn}" in mismatch.headline
    lines = mismatch.diff.splitlines()
    assert lines[:2] == ["--- recorded", "+++ replayed"]
    changed = [line for line in lines[2:] if line[:1] in "+-"]
    assert changed == ['-      "output": "5",', '+      "output": "6",']
    # The steer still travels beside the output: the context of the diff is readable JSON.
    assert '"call_id": "call-add",' in mismatch.diff
    assert "record the session again" in str(mismatch)
    with pytest.raises(ReplayMismatch):
        result.check()
    assert result.summary().startswith("replay FAILED: replay mismatch at cassette line")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_changed_instructions_are_detected_on_the_first_request(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport
) -> None:
    recording = await record(server, transport, workspace, tmp_path / "session.jsonl")
    changed = attrs.evolve(config(server, transport, workspace), instructions="Answer in French.")
    with trio.fail_after(20):
        result = await replay(recording.path, config=changed)
    mismatch = result.mismatch
    assert mismatch is not None
    first = next(o for o in Cassette.load(recording.path).observations if o.kind in ("ws.send", "http.request"))
    assert mismatch.line == first.line
    assert '+          "text": "Answer in French.",' in mismatch.diff.splitlines()
    assert any(line.startswith('-          "text": "You are a coding agent') for line in mismatch.diff.splitlines())
    assert result.turns == () or result.turns[0].status == "cancelled"  # stopped at the mismatch


async def test_a_turn_that_ends_differently_is_a_mismatch(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    """With one attempt per model call the replayed agent gives up at the dropped
    connection instead of reconnecting: the turn's end differs, and so does what it did."""
    recording = await record(server, ta.Transport.WEBSOCKET, workspace, tmp_path / "session.jsonl")
    base = config(server, ta.Transport.WEBSOCKET, workspace)
    one_attempt = attrs.evolve(base, responses=attrs.evolve(base.responses, max_attempts=1))
    with trio.fail_after(20):
        result = await replay(recording.path, config=one_attempt)
    assert result.turns == (ReplayedTurn(1, "failed", None),)
    mismatch = result.mismatch
    assert mismatch is not None
    (end,) = Cassette.load(recording.path).turn_ends()
    assert mismatch.headline == f"replay mismatch at cassette line {end.line}: turn 1 ended differently"
    assert mismatch.diff.splitlines() == [
        "--- recorded", "+++ replayed", "@@ -1,3 +1 @@", "-status: completed", "-final message:", f"-{ANSWER}",
        "+status: failed",
    ]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_recorded_rejection_is_replayed_as_the_same_rejection(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport, autojump_clock: object
) -> None:
    """A 429 with ``Retry-After: 7`` (the WebSocket handshake, or an HTTPS request) and
    then an answer: the replayed agent is refused the same way and waits the same 7 s."""
    path = tmp_path / "rejected.jsonl"

    async def script() -> None:
        if transport is ta.Transport.WEBSOCKET:
            await (await server.accept_raw()).reject(429, '{"error": {"message": "slow down"}}', [("Retry-After", "7")])
            conn = await server.accept()  # the warmup fallback: a full first request
            await conn.next_request()
            await conn.send_final("resp-1", "finally")
        else:
            request = await server.accept_http()
            await request.respond(429, '{"error": {"message": "slow down"}}', [("Retry-After", "7")])
            await (await server.accept_http()).send_final("resp-1", "finally")

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            async with ta.open_agent(config(server, transport, workspace, record=path)) as agent:
                assert (await (await agent.prompt("hello")).result()).final_message == "finally"
    cassette = Cassette.load(path)
    if transport is ta.Transport.WEBSOCKET:
        (refused,) = [o.data for o in cassette.observations if o.kind == "ws.error"]
        assert (refused["status"], refused["headers"]["retry-after"]) == (429, "7")
        assert refused["body"] == '{"error": {"message": "slow down"}}'
    else:
        (refused,) = [o.data for o in cassette.observations if o.kind == "http.response" and o.data["status"] == 429]
        assert refused["headers"]["retry-after"] == "7"

    with trio.fail_after(60):
        result = await replay(path, workspace=workspace, tools=add_tool())
    result.check()
    if transport is ta.Transport.WEBSOCKET:
        (failed,) = [e.payload for e in result.events if e.kind is ta.EventKind.MODEL_CONNECTION_FAILED]
        assert "HTTP 429" in failed["error"]
    else:
        (retrying,) = [e.payload for e in result.events if e.kind is ta.EventKind.MODEL_ATTEMPT_RETRYING]
        assert (retrying["delay_ns"], retrying["server_requested_delay"]) == (7_000_000_000, True)
    assert result.turns == (ReplayedTurn(1, "completed", "finally"),)


async def test_a_server_close_is_replayed_with_its_code_and_reason(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "closed.jsonl"

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send(frames.response_created("resp-1"))
        await conn.close(4000, "going away for a bit")
        again = await server.accept()
        await again.next_request()
        await again.send_final("resp-2", "back")

    log = EventLog()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            async with ta.open_agent(config(server, ta.Transport.WEBSOCKET, workspace, record=path)) as agent:
                nursery.start_soon(log.consume, agent.events)
                assert (await (await agent.prompt("hello")).result()).final_message == "back"
    (close, _) = [o.data for o in Cassette.load(path).observations if o.kind == "ws.close"]
    assert close == {"conn": 1, "by": "server", "code": 4000, "reason": "going away for a bit"}
    with trio.fail_after(20):
        result = await replay(path, workspace=workspace, tools=add_tool())
    result.check()

    def errors(events: list[ta.AgentEvent] | tuple[ta.AgentEvent, ...]) -> list[str]:
        return [e.payload["error"] for e in events if e.kind is ta.EventKind.MODEL_ATTEMPT_RETRYING]

    assert errors(result.events) == errors(log.events)
    assert "the connection closed with code 4000 PRIVATE_RESERVED (going away for a bit)" in errors(result.events)[0]
