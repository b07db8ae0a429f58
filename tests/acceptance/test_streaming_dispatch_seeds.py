"""Faithful ports of codex ``steers_during_tool_drain_preserve_tool_output_and_each_input``
and ``input_preempts_response_and_yields_running_code_mode_call``
(``seeds/codex_pending_input_tests.rs.txt``; codex.md 3.4-3.5), which are built on a tool
call that *starts while its response is still streaming*: codex dispatches each call when
its ``response.output_item.done`` arrives and the rest of the response keeps streaming.

Each port's ``seed`` case follows the seed's order: it first checks that the call
started while the server still holds the rest of its response (issue 27 item 1: a call
starts when its item is complete), then steers. The ``steer_before_tool_start`` cases
keep the order the earlier ports used: the same frames, the same held response, the
same assertions after the steer, but the steer is sent as soon as the call's item has
been read, without waiting for the tool to start (the call is dispatched at that
moment; the steer may land before its task first runs, and then an ``exec`` yields at
its first look). In ``input_preempts...`` the late ``second-exec`` is sent and asserted
never dispatched in every case: over HTTPS once the replacement request runs (on the
dropped stream), on the WebSocket after the interrupt, before the terminal frame.

How the seeds map (as in ``test_pending_input_seeds``):

- The seeds run codex's streaming HTTP/SSE server with ``store: false``; each port runs
  on both transports on the in-memory seam (so "exactly two requests" and "the tool
  had started" are checked facts once every task is blocked, never a timeout): HTTPS
  with ``store: false`` (full replay, the seeds' bodies), and the WebSocket with
  ``History.FULL_REPLAY`` (the same bodies). ``gated_chunk`` is the script waiting on a
  ``trio.Event`` the test sets.
- ``Feature::InstantInterrupt`` is ``turn.steer(text, interrupt=True)``. On HTTPS a
  preempted response's stream is dropped, as codex drops it. On the WebSocket, SPEC sec. 4
  overrides that: the client sends ``response.interrupt`` and drains the socket to the
  terminal frame, so the server answers the interrupt with ``response.incomplete``
  (``interrupted``) and the replacement request follows on the same socket -- it cannot
  run while the original response is still held, as it does over HTTP.
- The dynamic ``held_tool`` the test answers (``DynamicToolCallRequest`` /
  ``Op::DynamicToolResponse``) is a user function tool whose handler waits for the test
  (``_held_tool``); ``wait_for_event(DynamicToolCallRequest)`` is that handler starting.
- ``RawResponseItem`` (every item the turn took from the model) is the turn's committed
  history and its ``tool.call`` events.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, EventLog, FakeResponsesServer, frames

from .._codex_frames import ev_completed, ev_response_created, message_input_texts
from ..conftest import memory_config
from ._codex_http import finish, http_config, stream, terminal_statuses
from ._held_tool import held_tool, output_text

TRANSPORTS = [ta.Transport.HTTPS, ta.Transport.WEBSOCKET]
INTERRUPTED: dict[str, Any] = {"type": "response.incomplete", "response": {
    "status": "incomplete", "incomplete_details": {"reason": "interrupted"}}}
STREAMING_DISPATCH = "a tool call starts when its response.output_item.done arrives (issue 27 item 1)"
# The seed's order (the tool starts while its response streams), and the earlier ports'.
ORDERS = ["seed", "steer_before_tool_start"]


def interrupted(response_id: str) -> dict[str, Any]:
    return {**INTERRUPTED, "response": {"id": response_id, **INTERRUPTED["response"]}}


def config_for(transport: ta.Transport, server: FakeResponsesServer, workspace: Path, **kw: Any) -> ta.AgentConfig:
    if transport is ta.Transport.HTTPS:
        return http_config(server, workspace, **kw)
    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, dialer=server.dial,
                             history=ta.History.FULL_REPLAY)
    return memory_config(server, workspace, responses=responses, model="gpt-5.4", **kw)


def item_received(call_id: str) -> Callable[[ta.AgentEvent], bool]:
    """The inbound ``response.output_item.done`` of call ``call_id`` has been applied."""

    def received(event: ta.AgentEvent) -> bool:
        frame: Any = event.payload.get("event", {}) if event.kind is ta.EventKind.API_EVENT else {}
        return (event.payload.get("direction") == "inbound" and frame.get("type") == "response.output_item.done"
                and frame.get("item", {}).get("call_id") == call_id)

    return received


def tool_calls(log: EventLog) -> list[str]:
    return [str(p["call_id"]) for p in log.payloads("tool.call")]


def stream_errors(log: EventLog) -> list[str]:
    """``TurnAborted`` / ``StreamError``: what the seeds assert never happens."""
    return [e.kind.value for e in log.events if e.kind in (
        ta.EventKind.RUN_ERROR, ta.EventKind.MODEL_ATTEMPT_FAILED, ta.EventKind.MODEL_ATTEMPT_RETRYING)]


async def assert_started_while_streaming(log: EventLog, call_id: str, started: Callable[[], bool]) -> None:
    """The call's item has arrived and the server holds the rest of its response: once
    every task is blocked (all in memory), the call has started."""
    await log.wait_for(item_received(call_id))
    await trio.testing.wait_all_tasks_blocked()
    assert started(), f"{STREAMING_DISPATCH}: {call_id} had not started while its response was still streaming"


class Server:
    """The seeds' streaming server on either transport: request ``n`` (from 0, after the
    WebSocket's warmup) is answered by ``answers[n]`` in a task of its own, so one
    response can be held while the next request is served (HTTPS). On the WebSocket a
    ``response.interrupt`` the client sends is handed to ``on_interrupt``."""

    def __init__(self, server: FakeResponsesServer, transport: ta.Transport,
                 answers: list[Callable[[Any], Any]], on_interrupt: Callable[[Any, dict[str, Any]], Any]) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.arrived = [trio.Event() for _ in answers]
        self._server, self._transport, self._answers, self._on_interrupt = server, transport, answers, on_interrupt

    async def serve(self, nursery: trio.Nursery) -> None:
        if self._transport is ta.Transport.HTTPS:
            while True:
                request = await self._server.accept_http()
                self._arrive(request.body, nursery, request)
        conn = await self._server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        while True:
            try:
                body = await conn.next_request()
            except ClientDisconnected:  # the agent closed
                return
            if body.get("type") == "response.interrupt":
                nursery.start_soon(self._on_interrupt, conn, body)
            else:
                self._arrive(body, nursery, conn)

    def _arrive(self, body: dict[str, Any], nursery: trio.Nursery, answer_to: Any) -> None:
        self.bodies.append(body)
        index = len(self.bodies) - 1
        if index < len(self._answers):  # a request beyond them is recorded, never answered
            self.arrived[index].set()
            nursery.start_soon(self._answers[index], answer_to)


@contextlib.asynccontextmanager
async def agent_beside(server: Server, config: ta.AgentConfig, log: EventLog) -> AsyncIterator[ta.Agent]:
    """The agent beside ``server``, its events into ``log``; on exit, once every task is
    blocked (all in memory: nothing in flight), the server's tasks are cancelled -- a
    response the script still holds is never finished, as the seeds drop their gates."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve, nursery)
        async with ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            yield agent
            await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()


async def open_response(transport: ta.Transport, to: Any, sent: list[dict[str, Any]]) -> None:
    """Start a response with ``sent`` and keep it open (an HTTP event stream, or frames
    on the WebSocket)."""
    if transport is ta.Transport.HTTPS:
        await stream(to, sent)
    else:
        await to.send_all(sent)


async def end_response(transport: ta.Transport, to: Any, sent: list[dict[str, Any]]) -> None:
    """Send the rest of a response begun with ``open_response`` (and end its HTTP stream)."""
    if transport is ta.Transport.HTTPS:
        await finish(to, sent)
    else:
        await to.send_all(sent)


# -- steers_during_tool_drain_preserve_tool_output_and_each_input -----------------------------

TOOL_CALL_ID = "held-tool"


@pytest.mark.parametrize("transport", TRANSPORTS, ids=["https", "websocket"])
@pytest.mark.parametrize("order", ORDERS)
async def test_steers_during_tool_drain_preserve_tool_output_and_each_input(
    memory_server: FakeResponsesServer, workspace: Path, transport: ta.Transport, order: str
) -> None:
    release_tool, tool_started = trio.Event(), trio.Event()
    calls: list[str] = []

    async def first(to: Any) -> None:
        await open_response(transport, to, [
            ev_response_created("resp-1"),
            frames.output_item_done(0, frames.function_call(TOOL_CALL_ID, "held_tool", "{}")),
        ])
        # gated_chunk(response_gate, [ev_completed("resp-1")]): the gate is never opened
        # (the seed drops it at the end), so the replacement request runs while this
        # response is held -- over HTTPS; on the WebSocket the interrupt's answer ends it.
        await trio.sleep_forever()

    async def second(to: Any) -> None:  # response_completed_chunks("resp-2")
        await open_response(transport, to, [ev_response_created("resp-2")])
        await end_response(transport, to, [ev_completed("resp-2")])

    async def on_interrupt(conn: Any, frame: dict[str, Any]) -> None:
        assert frame == {"type": "response.interrupt", "response_id": "resp-1", "mode": "discard_partial_items"}
        await conn.send(interrupted("resp-1"))

    server, log = Server(memory_server, transport, [first, second], on_interrupt), EventLog()
    config = config_for(transport, memory_server, workspace, tools=held_tool(tool_started, release_tool, calls))
    async with agent_beside(server, config, log) as agent:
        turn = await agent.prompt("first prompt")  # submit_user_input
        if order == "seed":
            # wait_for_event(DynamicToolCallRequest): the tool runs; the response is held.
            await assert_started_while_streaming(log, TOOL_CALL_ID, tool_started.is_set)
        else:
            await log.wait_for(item_received(TOOL_CALL_ID))
        await turn.steer("second prompt", interrupt=True)  # steer_user_input (InstantInterrupt)
        await turn.steer("third prompt", interrupt=True)
        release_tool.set()  # Op::DynamicToolResponse "held tool result"
        with trio.fail_after(10):
            await turn.result()

    assert terminal_statuses(log) == ["completed"]  # TurnComplete without an error
    assert stream_errors(log) == []  # never TurnAborted or StreamError
    assert calls == [TOOL_CALL_ID]
    assert len(server.bodies) == 2
    second_body = server.bodies[1]
    prompts = [t for t in message_input_texts(second_body, "user")
               if t in ("first prompt", "second prompt", "third prompt")]
    assert prompts == ["first prompt", "second prompt", "third prompt"]
    result = output_text(second_body, "function_call_output", TOOL_CALL_ID)
    assert result is not None and "held tool result" in result, result
    outputs = [item for item in second_body["input"]
               if item.get("type") == "function_call_output" and item.get("call_id") == TOOL_CALL_ID]
    assert len(outputs) == 1, "the direct tool result should be recorded exactly once"


# -- input_preempts_response_and_yields_running_code_mode_call --------------------------------

FIRST_EXEC = "// @exec: {\"yield_time_ms\": 60000}\nawait tools.held_tool({}); text('first completed');"
SECOND_EXEC = "// @exec: {\"yield_time_ms\": 60000}\nawait new Promise(() => {});"


@pytest.mark.parametrize("transport", TRANSPORTS, ids=["https", "websocket"])
@pytest.mark.parametrize("order", ORDERS)
async def test_input_preempts_response_and_yields_running_code_mode_call(
    memory_server: FakeResponsesServer, workspace: Path, transport: ta.Transport, order: str,
) -> None:
    release_second, release_final, old_done = trio.Event(), trio.Event(), trio.Event()
    held_started, release_held = trio.Event(), trio.Event()
    late_call = frames.output_item_done(1, frames.custom_tool_call("second-exec", "exec", SECOND_EXEC))

    async def calls_response(to: Any) -> None:
        await open_response(transport, to, [
            ev_response_created("resp-calls"),
            frames.output_item_done(0, frames.custom_tool_call("first-exec", "exec", FIRST_EXEC)),
        ])
        if transport is ta.Transport.HTTPS:
            # The second call remains unavailable while the steer is processed; it is
            # offered only once the replacement request is running.
            await release_second.wait()
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await end_response(transport, to, [late_call, ev_completed("resp-calls")])
            old_done.set()  # the old response finished or detected the closed client

    async def follow_up(to: Any) -> None:
        await open_response(transport, to, [ev_response_created("resp-follow-up")])
        await release_final.wait()
        await end_response(transport, to, [ev_completed("resp-follow-up")])

    async def on_interrupt(conn: Any, frame: dict[str, Any]) -> None:
        # The WebSocket drains the interrupted response: the late call arrives after the
        # cut, before the terminal frame, and must never be dispatched.
        assert frame == {"type": "response.interrupt", "response_id": "resp-calls", "mode": "discard_partial_items"}
        await conn.send_all([late_call, interrupted("resp-calls")])
        old_done.set()

    server, log = Server(memory_server, transport, [calls_response, follow_up], on_interrupt), EventLog()
    config = config_for(transport, memory_server, workspace, tools=held_tool(held_started, release_held, []))
    async with agent_beside(server, config, log) as agent:
        turn = await agent.prompt("start cells")  # submit_user_input
        if order == "seed":
            await assert_started_while_streaming(log, "first-exec", lambda: "first-exec" in tool_calls(log))
            with trio.fail_after(10):  # wait_for_event(DynamicToolCallRequest held_tool), from the cell
                await held_started.wait()
        else:
            await log.wait_for(item_received("first-exec"))
        await turn.steer("yield cells", interrupt=True)  # steer_user_input (InstantInterrupt)
        with trio.fail_after(10):  # "the first exec should yield before the follow-up"
            await server.arrived[1].wait()
        follow_up_body = server.bodies[1]
        first = output_text(follow_up_body, "custom_tool_call_output", "first-exec")
        assert first is not None and first.startswith("Script running with cell ID "), first
        assert output_text(follow_up_body, "custom_tool_call_output", "second-exec") is None
        assert "yield cells" in message_input_texts(follow_up_body, "user")
        release_second.set()  # deliver the late call only after the replacement is running
        with trio.fail_after(10):
            await old_done.wait()
        release_held.set()  # Op::DynamicToolResponse "released"
        release_final.set()
        with trio.fail_after(10):
            result = await turn.result()

    assert terminal_statuses(log) == ["completed"]  # TurnComplete without an error
    assert len(server.bodies) == 2
    # RawResponseItem: the late call never entered the turn, nor ran.
    assert "second-exec" not in tool_calls(log)
    assert not [item for item in result.snapshot().history if item.get("call_id") == "second-exec"]
