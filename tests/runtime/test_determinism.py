"""The same scripted scenario gives the same event-kind sequence every time (SPEC sec. 4).

Each scenario runs on in-memory peers (``FakeResponsesServer.in_memory()``, no socket)
under ``MockClock(autojump_threshold=0)``, places its steer or cancel at an exact point
with Trio synchronisation (events set by the scripted server, ``wait_all_tasks_blocked``,
a gate on the client's stream), then runs 50 times; every run must produce the
identical sequence of event kinds -- api.event frames, tool events and terminal events
included.

The race of a steer with the final answer is not left to the scheduler: the steer is
placed on each side of the turn's finish decision -- before the final answer reached
the client, while it is on the wire but unread, and right after the decision -- and
the test asserts that both outcomes (an accepted steer that reached the server, and
``TurnNotSteerable`` with nothing sent) happened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, memory_config, scripted, warm

RUNS = 50
RACE_RUNS = 10
Scenario = Callable[[FakeResponsesServer, Path], Awaitable[list[str]]]


async def _run(
    server: FakeResponsesServer, workspace: Path, script: Any, body: Any, *, log: EventLog | None = None, **kw: Any
) -> list[str]:
    log = log or EventLog()
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(memory_config(server, workspace, **kw)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await body(agent)
    return log.kinds()


async def steer_fifo(server: FakeResponsesServer, workspace: Path) -> list[str]:
    seen, release = trio.Event(), trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        seen.set()
        await release.wait()
        await conn.send_final("resp-1")
        await conn.next_request()
        await conn.send_final("resp-2")

    async def body(agent: ta.Agent) -> None:
        turn = await agent.prompt("task")
        await seen.wait()
        for index in range(3):
            await turn.steer(f"steer {index}")
        release.set()
        await turn.result()

    return await _run(server, workspace, script, body)


async def interrupt_and_drain(server: FakeResponsesServer, workspace: Path) -> list[str]:
    streaming = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_all([frames.response_created("resp-1"), frames.text_delta(0, "partial")])
        streaming.set()
        await conn.next_request()  # the interrupt
        await conn.send({"type": "response.incomplete", "response": {
            "id": "resp-1", "status": "incomplete", "incomplete_details": {"reason": "interrupted"}}})
        await conn.next_request()
        await conn.send_final("resp-2")

    async def body(agent: ta.Agent) -> None:
        turn = await agent.prompt("task")
        await streaming.wait()
        await trio.testing.wait_all_tasks_blocked()
        await turn.steer("now this", interrupt=True)
        await turn.result()

    return await _run(server, workspace, script, body)


async def cancel_during_tool(server: FakeResponsesServer, workspace: Path) -> list[str]:
    started = trio.Event()

    async def held(ctx: ta.ToolContext, args: Any) -> str:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "held", {})
        second = await server.accept()
        await second.next_request()
        await second.send_final("resp-2")

    async def body(agent: ta.Agent) -> None:
        turn = await agent.prompt("task")
        await started.wait()
        await turn.cancel()
        await (await agent.prompt("again")).result()

    tools = ta.Tools.default().function("held", "Never returns.", {"type": "object"}, held)
    return await _run(server, workspace, script, body, tools=tools)


async def _assert_deterministic(scenario: Scenario, tmp_path: Path) -> list[str]:
    sequences = set()
    first: list[str] = []
    for run in range(RUNS):
        workspace = tmp_path / f"run-{run}"
        workspace.mkdir()
        async with trio.open_nursery() as nursery:
            server = FakeResponsesServer.in_memory()
            await nursery.start(server.serve)
            kinds = await scenario(server, workspace)
            assert server.port is None and len(server.dialed) == len(server.handshakes)  # memory only
            nursery.cancel_scope.cancel()
        first = first or kinds
        sequences.add(tuple(kinds))
    assert len(sequences) == 1, f"{len(sequences)} different event sequences in {RUNS} runs"
    return first


async def test_steering_fifo_is_deterministic(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    kinds = await _assert_deterministic(steer_fifo, tmp_path)
    assert kinds.count("run.steered") == 3
    assert kinds[-1] == "run.completed"


async def test_interrupt_and_drain_is_deterministic(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    kinds = await _assert_deterministic(interrupt_and_drain, tmp_path)
    assert kinds.count("run.steered") == 1
    assert kinds[-1] == "run.completed"


async def test_cancel_during_a_tool_is_deterministic(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    kinds = await _assert_deterministic(cancel_during_tool, tmp_path)
    assert [k for k in kinds if k in ("run.completed", "run.failed")] == ["run.failed", "run.completed"]
    assert "run.error" not in kinds  # a cancellation is not an error (issue 12)


# -- a steer racing the final answer, placed on each side of the finish decision ----------


class GatedStream(trio.abc.Stream):
    """The client's end of an in-memory connection; while ``hold`` is set, received
    bytes wait at the gate: a frame can be on the wire but not yet read."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.hold: trio.Event | None = None

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        if self.hold is not None:
            await self.hold.wait()
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


# Where the steer lands relative to the final answer (``response.completed`` with an
# assistant message and no tool call), and what must happen:
PLACEMENTS = {
    # the final message item arrived; its response.completed is not sent yet
    "before_completed_was_sent": True,
    # response.completed is in the client's receive buffer, not read yet
    "completed_on_the_wire_unread": True,
    # the client read it and decided to finish (model.call.completed was emitted)
    "after_the_finish_decision": False,
}


async def _race_once(workspace: Path, placement: str) -> tuple[bool, list[str]]:
    """One race; returns (steer accepted, event kinds). Asserts the accepted steer
    reached the server in a follow-up request, or that nothing more was sent."""
    follow_ups: list[dict[str, Any]] = []
    gates: list[GatedStream] = []
    message_sent, send_completed, completed_sent = trio.Event(), trio.Event(), trio.Event()
    accepted = False
    server = FakeResponsesServer.in_memory()

    async def dial(host: str, port: int) -> trio.abc.Stream:
        gates.append(GatedStream(await server.dial(host, port)))
        return gates[-1]

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        message = frames.assistant_message("final answer", item_id="msg_1", phase="final_answer")
        await conn.send_all([frames.response_created("resp-1"), frames.output_item_done(0, message)])
        message_sent.set()
        await send_completed.wait()
        await conn.send_completed("resp-1", [message])
        completed_sent.set()
        try:
            follow_ups.append(await conn.next_request())
        except Exception:  # the client closed: no follow-up was sent
            return
        await conn.send_final("resp-2")

    async def body(agent: ta.Agent) -> None:
        nonlocal accepted
        turn = await agent.prompt("task")
        await log.wait_for(lambda e: e.kind is ta.EventKind.ASSISTANT_MESSAGE)
        await message_sent.wait()
        if placement == "completed_on_the_wire_unread":
            gates[-1].hold = release = trio.Event()
        send_completed.set()
        if placement != "before_completed_was_sent":
            await completed_sent.wait()
            await trio.testing.wait_all_tasks_blocked()
        if placement == "after_the_finish_decision":
            await log.wait_for(lambda e: e.kind is ta.EventKind.MODEL_CALL_COMPLETED)
        try:
            await turn.steer("late guidance")
            accepted = True
        except ta.TurnNotSteerable:
            accepted = False
        if placement == "completed_on_the_wire_unread":
            gates[-1].hold = None
            release.set()
        await turn.result()

    log = EventLog()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, dialer=dial)
        kinds = await _run(server, workspace, script, body, log=log, responses=responses)
        nursery.cancel_scope.cancel()
    if accepted:
        (follow_up,) = follow_ups
        assert follow_up["previous_response_id"] == "resp-1"
        assert follow_up["input"][-1]["content"][0]["text"] == "late guidance"
        assert log.payloads("run.steered") == [{"steer_index": 1, "instruction_bytes": len("late guidance")}]
    else:
        assert follow_ups == [] and "run.steered" not in kinds
    return accepted, kinds


@pytest.mark.parametrize("placement", list(PLACEMENTS))
async def test_a_steer_racing_the_final_answer_is_placed_exactly(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, placement: str
) -> None:
    """Each placement has one outcome, every run, with one event sequence."""
    outcomes, sequences = set(), set()
    for run in range(RACE_RUNS):
        workspace = tmp_path / f"race-{run}"
        workspace.mkdir()
        accepted, kinds = await _race_once(workspace, placement)
        outcomes.add(accepted)
        sequences.add(tuple(kinds))
    assert outcomes == {PLACEMENTS[placement]}
    assert len(sequences) == 1


async def test_a_steer_racing_the_final_answer_takes_both_branches_and_is_never_lost(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Across the placements, a racing steer both joins the turn (one more request
    carrying it) and fails with ``TurnNotSteerable`` -- and is never silently dropped
    (``_race_once`` checks the wire for each)."""
    outcomes = {}
    for placement in PLACEMENTS:
        workspace = tmp_path / placement
        workspace.mkdir()
        outcomes[placement], _ = await _race_once(workspace, placement)
    assert set(outcomes.values()) == {True, False}
    assert outcomes == PLACEMENTS
