"""An interrupting steer placed at exact points (``trio.testing.Sequencer``, MockClock).

Each case scripts the server up to a point, then -- strictly after, by the sequencer --
steers with ``interrupt=True`` once the client has processed everything it was sent,
then lets the server continue. The outcome on the wire is fixed for every point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted

POINTS = ["during_warmup", "before_response_id", "mid_delta", "between_item_and_completion", "during_tool",
          "during_backoff"]
INCOMPLETE = {"type": "response.incomplete", "response": {
    "id": "resp-live", "status": "incomplete", "incomplete_details": {"reason": "interrupted"}}}


def texts(body: dict[str, Any]) -> list[str]:
    return [part.get("text", "") for item in body["input"] for part in (item.get("content") or [])
            if isinstance(part, dict)]


async def _until(conn: FakeConnection, point: str) -> None:
    if point == "mid_delta":
        await conn.send_all([frames.response_created("resp-live"), frames.text_delta(0, "par")])
    elif point == "between_item_and_completion":
        item = frames.assistant_message("said before the steer", item_id="msg_live")
        await conn.send_all([frames.response_created("resp-live"), frames.output_item_done(0, item)])
    elif point == "during_tool":
        await conn.send_tool_call("resp-live", "call-held", "held", {})
    elif point == "during_backoff":
        await conn.send_error("busy", code="server_is_overloaded", retry_after=30)


async def _after(server: FakeResponsesServer, conn: FakeConnection, point: str) -> dict[str, Any]:
    """Finish the interrupted exchange; returns the request that carries the steer."""
    if point in ("before_response_id", "mid_delta", "between_item_and_completion"):
        if point == "before_response_id":
            await conn.send(frames.response_created("resp-live"))
        interrupt = await conn.next_request()
        assert interrupt == {"type": "response.interrupt", "response_id": "resp-live",
                             "mode": "discard_partial_items"}
        await conn.send(INCOMPLETE)
        return await conn.next_request()
    if point == "during_backoff":
        retry = await server.accept()
        return await retry.next_request()
    return await conn.next_request()  # during_tool: the tool finishes, then the steer joins


@pytest.mark.parametrize("point", POINTS)
async def test_an_interrupting_steer_at_an_exact_point(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock, point: str
) -> None:
    seq = trio.testing.Sequencer()
    release_tool = trio.Event()

    async def held(ctx: ta.ToolContext, args: Any) -> str:
        await release_tool.wait()
        return "tool result"

    tools = ta.Tools.default().function("held", "Waits for the test.", {"type": "object"}, held)
    carried: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()  # the warmup
        async with seq(0):
            if point != "during_warmup":
                await conn.send_warmup("resp-warmup")
                await conn.next_request()
                await _until(conn, point)
        async with seq(2):
            if point == "during_warmup":
                await conn.send_warmup("resp-warmup")
                carried.append(await conn.next_request())
            else:
                release_tool.set()
                carried.append(await _after(server, conn, point))
            await server.connections[-1].send_final("resp-done")

    log = EventLog()
    start = trio.current_time()
    async with scripted(script, 100) as nursery:
        async with ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
            nursery.start_soon(log.consume, agent.events)
            turn = await agent.prompt("the task")
            steered = trio.Event()

            async def steer() -> None:
                await turn.steer("change of plan", interrupt=True)
                steered.set()

            async with seq(1):
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(steer)
                await trio.testing.wait_all_tasks_blocked()
                # steer() returns once its interrupt is on the wire; before the response id
                # is known that is not yet possible, so it is still waiting.
                assert steered.is_set() is (point != "before_response_id")
            assert (await turn.result()).final_message == "done"
            assert steered.is_set()
    (body,) = carried
    assert texts(body)[-1] == "change of plan"
    assert json.dumps(body).count("change of plan") == 1
    assert log.payloads("run.steered") == [{"steer_index": 1, "instruction_bytes": len("change of plan")}]
    interrupts = [p for p in log.payloads("api.event") if p["event"].get("type") == "response.interrupt"]
    expect_interrupt = point in ("before_response_id", "mid_delta", "between_item_and_completion")
    assert len(interrupts) == (1 if expect_interrupt else 0)
    if point == "during_warmup":
        assert texts(body)[-2:] == ["the task", "change of plan"]  # joined the first request
    if expect_interrupt:
        assert body["previous_response_id"] == "resp-live"
        assert len(body["input"]) == 1
    if point == "during_tool":
        assert body["input"][0]["type"] == "function_call_output"
        assert body["input"][0]["output"] == "tool result"
    if point == "during_backoff":
        assert "previous_response_id" not in body
        assert trio.current_time() - start == 0.0  # the server's 30 s were skipped entirely
