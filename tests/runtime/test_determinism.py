"""The same scripted scenario gives the same event-kind sequence every time (SPEC sec. 4).

Each scenario places its steer or cancel at an exact point with Trio synchronisation
(events set by the scripted server, ``wait_all_tasks_blocked``), then runs 50 times;
every run must produce the identical sequence of event kinds -- api.event frames,
tool events and terminal events included.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm

RUNS = 50
Scenario = Callable[[FakeResponsesServer, Path], Awaitable[list[str]]]


async def _run(server: FakeResponsesServer, workspace: Path, script: Any, body: Any, **kw: Any) -> list[str]:
    log = EventLog()
    async with scripted(script, 20) as nursery:
        async with ta.open_agent(make_config(server, workspace, **kw)) as agent:
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
            server = FakeResponsesServer()
            await nursery.start(server.serve)
            kinds = await scenario(server, workspace)
            nursery.cancel_scope.cancel()
        first = first or kinds
        sequences.add(tuple(kinds))
    assert len(sequences) == 1, f"{len(sequences)} different event sequences in {RUNS} runs"
    return first


async def test_steering_fifo_is_deterministic(tmp_path: Path) -> None:
    kinds = await _assert_deterministic(steer_fifo, tmp_path)
    assert kinds.count("run.steered") == 3
    assert kinds[-1] == "run.completed"


async def test_interrupt_and_drain_is_deterministic(tmp_path: Path) -> None:
    kinds = await _assert_deterministic(interrupt_and_drain, tmp_path)
    assert kinds.count("run.steered") == 1
    assert kinds[-1] == "run.completed"


async def test_cancel_during_a_tool_is_deterministic(tmp_path: Path) -> None:
    kinds = await _assert_deterministic(cancel_during_tool, tmp_path)
    assert [k for k in kinds if k in ("run.completed", "run.failed")] == ["run.failed", "run.completed"]
    assert "run.error" in kinds


async def _race_once(workspace: Path, delay_checkpoints: int) -> bool:
    follow_ups: list[dict[str, Any]] = []
    seen = trio.Event()
    accepted = False
    async with trio.open_nursery() as nursery:
        server = FakeResponsesServer()
        await nursery.start(server.serve)

        async def script() -> None:
            conn = await warm(server)
            await conn.next_request()
            seen.set()
            await conn.send_final("resp-1")
            try:
                follow_ups.append(await conn.next_request())
                await conn.send_final("resp-2")
            except Exception:  # the client closed: no follow-up was sent
                return

        async def body(agent: ta.Agent) -> None:
            nonlocal accepted
            turn = await agent.prompt("task")
            await seen.wait()
            for _ in range(delay_checkpoints):  # vary where the steer lands
                await trio.lowlevel.checkpoint()
            try:
                await turn.steer("late guidance")
                accepted = True
            except ta.TurnNotSteerable:
                accepted = False
            await turn.result()
            if accepted:
                assert follow_ups and follow_ups[0]["input"][0]["content"][0]["text"] == "late guidance"
            else:
                assert not follow_ups

        await _run(server, workspace, script, body)
        nursery.cancel_scope.cancel()
    return accepted


async def test_a_steer_racing_the_final_answer_is_never_lost(tmp_path: Path) -> None:
    """A steer sent while the final answer arrives either joins the turn (one more
    request carrying it) or fails with ``TurnNotSteerable`` -- never silently dropped."""
    for run in range(30):
        workspace = tmp_path / f"race-{run}"
        workspace.mkdir()
        # _race_once asserts the accepted steer reached the server, or that nothing did.
        await _race_once(workspace, run % 5)
