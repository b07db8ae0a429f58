"""The recorded session the replay tests share: a tool call, a steer and a reconnect.

``record(transport, ...)`` runs one agent against a scripted ``FakeResponsesServer``
(real loopback) with ``AgentConfig(record=...)``:

1. (WebSocket) the startup warmup;
2. the prompt "add 2 and 3": the server streams a commentary delta and waits; the
   test steers ("and say it in words") once the agent has shown the delta, then the
   server answers with a call of the ``add`` function tool;
3. the continuation (the tool output and the steer): the server starts a response
   and drops the connection mid-response;
4. the agent reconnects (a new socket / a new request) and replays; the server
   answers "it is 5".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

import trio_agent as ta
from trio_agent.testing import FakeHttpRequest, FakeResponsesServer, frames

from ..conftest import EventLog

PROMPT = "add 2 and 3"
STEER = "and say it in words"
ANSWER = "it is 5, five"
SESSION_ID = "replay-session"


def add_tool(offset: int = 0) -> ta.Tools:
    async def add(ctx: ta.ToolContext, args: Any) -> str:
        return str(args["a"] + args["b"] + offset)

    return ta.Tools.default().function("add", "Add two numbers.", {"type": "object"}, add)


def config(server: FakeResponsesServer, transport: ta.Transport, workspace: Path, **kw: Any) -> ta.AgentConfig:
    if transport is ta.Transport.WEBSOCKET:
        responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url)
    else:
        responses = ta.Responses(profile=ta.Profile.OPENAI, transport=transport, api_base_url=server.http_base_url)
    kw.setdefault("tools", add_tool())
    return ta.AgentConfig(auth="test-key", thinking=ta.Thinking.LOW, workspace=workspace, responses=responses,
                          session_id=SESSION_ID, **kw)


def _commentary() -> list[dict[str, Any]]:
    added = {**frames.assistant_message("", item_id="msg_c1", phase="commentary"), "status": "in_progress",
             "content": []}
    return [frames.output_item_added(0, added), frames.text_delta(0, "Adding")]


_CALL = frames.function_call("call-add", "add", '{"a": 2, "b": 3}', item_id="fc_server_1")


async def _websocket_model(server: FakeResponsesServer, steered: trio.Event) -> None:
    conn = await server.accept()
    await conn.next_request()
    await conn.send_warmup("resp-warmup")
    await conn.next_request()
    await conn.send(frames.response_created("resp-1"))
    await conn.send_all(_commentary())
    await steered.wait()
    await conn.send_completed("resp-1", [_CALL])
    await conn.next_request()
    await conn.send(frames.response_created("resp-2"))
    await conn.drop()  # mid-response: the agent reconnects and replays
    again = await server.accept()
    await again.next_request()
    await again.send_final("resp-3", ANSWER)


async def _https_model(server: FakeResponsesServer, steered: trio.Event) -> None:
    first: FakeHttpRequest = await server.accept_http()
    await first.start_stream()
    await first.send_event(frames.response_created("resp-1"))
    for frame in _commentary():
        await first.send_event(frame)
    await steered.wait()
    await first.send_event(frames.completed("resp-1", [_CALL]))
    await first.finish()
    second = await server.accept_http()
    await second.start_stream()
    await second.send_event(frames.response_created("resp-2"))
    await second.drop()  # mid-response: the agent retries on a new request
    third = await server.accept_http()
    await third.send_final("resp-3", ANSWER)


@attrs.frozen
class Recording:
    path: Path
    log: EventLog
    result: ta.TurnResult


async def drive(agent: ta.Agent, log: EventLog, steered: trio.Event) -> ta.TurnResult:
    """The user's side of the session: the prompt, and the steer once a delta showed."""
    turn = await agent.prompt(PROMPT)
    await log.wait_for(lambda e: e.kind is ta.EventKind.ASSISTANT_DELTA)
    await turn.steer(STEER)
    steered.set()
    return await turn.result()


async def record(server: FakeResponsesServer, transport: ta.Transport, workspace: Path, path: Path,
                 **kw: Any) -> Recording:
    steered = trio.Event()
    model = _websocket_model if transport is ta.Transport.WEBSOCKET else _https_model
    log = EventLog()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(model, server, steered)
            async with ta.open_agent(config(server, transport, workspace, record=path, **kw)) as agent:
                nursery.start_soon(log.consume, agent.events)
                result = await drive(agent, log, steered)
    return Recording(path, log, result)


def comparable(events: list[ta.AgentEvent] | tuple[ta.AgentEvent, ...]) -> list[tuple[str, Any]]:
    """What must be the same in a replay: each event's kind and its behaviour-level payload."""
    keep = {
        "tool.call": ("tool", "call_id", "arguments"), "tool.result": ("tool", "call_id", "status", "result"),
        "assistant.delta": ("text",), "assistant.message": ("text",), "run.steered": ("steer_index",),
        "model.connection.started": ("purpose",), "model.attempt.retrying": ("error_class",),
        "run.completed": ("status", "model_calls", "steers", "connection_attempts"),
    }
    out: list[tuple[str, Any]] = []
    for event in events:
        kind = event.kind.value
        fields = keep.get(kind, ())
        out.append((kind, tuple(event.payload.get(f) for f in fields)))
    return out
