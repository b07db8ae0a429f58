"""``clock.sleep``: the port of ``any_new_input_interrupts_sleep`` (codex_pending_input
seeds; codex.md 3.7), and sleeps inside a turn. Full replay, so the follow-up requests
carry the whole history as the seed's stateless HTTP server sees it.
(``queue_only_agent_mail_wakes_sleeping_root_with_previous_turn_context``, a root asleep
*between* turns, is ported in ``test_sleeping_root.py``.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from .._helpers import user_texts
from ..conftest import EventLog, make_config, scripted, warm

HOUR_MS = 3_600_000


def sleep_call(call_id: str, duration_ms: Any = HOUR_MS) -> dict[str, Any]:
    return {**frames.function_call(call_id, "sleep", json.dumps({"duration_ms": duration_ms})), "namespace": "clock"}


def output_of(body: dict[str, Any], call_id: str) -> str:
    (item,) = [i for i in body["input"] if i.get("type") == "function_call_output" and i.get("call_id") == call_id]
    return str(item["output"])


def assert_interrupted(output: str) -> None:
    assert output.startswith("Wall time: ") and output.endswith(" seconds\nSleep interrupted by new input.")
    float(output.removeprefix("Wall time: ").split(" seconds")[0])


def config(server: FakeResponsesServer, workspace: Path, **kw: Any) -> ta.AgentConfig:
    return make_config(server, workspace, tools=ta.Tools.default().with_clock(),
                       responses=ta.Responses(profile=ta.Profile.OPENAI,
                                              websocket_url=server.url, history=ta.History.FULL_REPLAY), **kw)


async def test_any_new_input_interrupts_sleep(server: FakeResponsesServer, workspace: Path, tmp_path: Path) -> None:
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        bodies.append(await conn.next_request())
        await conn.send_completed("resp-1", [sleep_call("sleep-call-1")])
        bodies.append(await conn.next_request())
        await conn.send_completed("resp-2", [sleep_call("sleep-call-2")])
        bodies.append(await conn.next_request())
        await conn.send_final("resp-3", "awake")

    log = EventLog()
    home = tmp_path / "home"
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace, rollout=ta.RolloutConfig(home))
                                                         ) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("sleep for a while")
        await log.wait_for(lambda e: e.kind.value == "sleep.started" and e.payload["id"] == "sleep-call-1")
        await turn.steer("stop sleeping and continue")  # a plain steer
        await log.wait_for(lambda e: e.kind.value == "sleep.started" and e.payload["id"] == "sleep-call-2")
        await agent.post_mail("/root/worker", "new mailbox input")  # queue-only mail
        assert (await turn.result()).final_message == "awake"
        assert agent.rollout is not None
        path = agent.rollout.path
    assert len(bodies) == 3
    second, third = bodies[1], bodies[2]
    relevant = [t for t in user_texts(second) if t in ("sleep for a while", "stop sleeping and continue")]
    assert relevant == ["sleep for a while", "stop sleeping and continue"]
    assert_interrupted(output_of(second, "sleep-call-1"))
    assert_interrupted(output_of(third, "sleep-call-2"))
    started = [(p["id"], p["duration_ms"]) for p in log.payloads("sleep.started")]
    assert started == [("sleep-call-1", HOUR_MS), ("sleep-call-2", HOUR_MS)]
    assert [p["interrupted"] for p in log.payloads("sleep.completed")] == [True, True]
    persisted = [line["payload"]["item"] for line in map(json.loads, path.read_text().splitlines())
                 if line["type"] == "event_msg" and line["payload"].get("type") == "item_completed"]
    assert persisted == [{"type": "sleep", "id": "sleep-call-1", "duration_ms": HOUR_MS},
                         {"type": "sleep", "id": "sleep-call-2", "duration_ms": HOUR_MS}]


async def test_a_sleep_nobody_interrupts_completes_on_trios_clock(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    outputs: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-1", [sleep_call("nap", 90_000)])
        outputs.append(output_of(await conn.next_request(), "nap"))
        await conn.send_final("resp-2")

    start = trio.current_time()
    async with scripted(script, 200), ta.open_agent(config(server, workspace)) as agent:
        await (await agent.prompt("nap")).result()
    assert outputs == ["Wall time: 90.0000 seconds\nSleep completed."]
    assert trio.current_time() - start == pytest.approx(90.0, abs=1e-9)


@pytest.mark.parametrize("arguments", [{}, {"duration_ms": 0}, {"duration_ms": 43_200_001}, {"duration_ms": "1"},
                                       {"duration_ms": True}])
async def test_bad_sleep_arguments_are_failed_outputs(
    server: FakeResponsesServer, workspace: Path, arguments: dict[str, Any]
) -> None:
    outputs: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        call = {**frames.function_call("nap", "sleep", json.dumps(arguments)), "namespace": "clock"}
        await conn.send_completed("resp-1", [call])
        outputs.append(output_of(await conn.next_request(), "nap"))
        await conn.send_final("resp-2")

    async with scripted(script), ta.open_agent(config(server, workspace)) as agent:
        await (await agent.prompt("nap")).result()
    assert outputs[0].startswith("clock.sleep ")


async def test_sleep_is_unsupported_unless_the_clock_group_is_on(server: FakeResponsesServer, workspace: Path) -> None:
    outputs: list[str] = []

    async def script() -> None:
        warmup_conn = await server.accept()
        warmup = await warmup_conn.next_request()
        assert not any(t.get("type") == "namespace" for t in warmup["input"][0]["tools"])
        await warmup_conn.send_warmup("resp-warmup")
        await warmup_conn.next_request()
        await warmup_conn.send_completed("resp-1", [sleep_call("nap")])
        outputs.append(output_of(await warmup_conn.next_request(), "nap"))
        await warmup_conn.send_final("resp-2")

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        await (await agent.prompt("nap")).result()
    assert outputs == ["unsupported call: clocksleep"]


async def test_the_clock_group_is_a_namespace_tool(server: FakeResponsesServer, workspace: Path) -> None:
    checked = trio.Event()

    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        (clock,) = [t for t in warmup["input"][0]["tools"] if t.get("type") == "namespace"]
        assert clock["name"] == "clock"
        assert [(t["type"], t["name"]) for t in clock["tools"]] == [("function", "sleep")]
        assert clock["tools"][0]["parameters"]["required"] == ["duration_ms"]
        await conn.send_warmup("resp-warmup")
        checked.set()

    async with scripted(script), ta.open_agent(config(server, workspace)):
        await checked.wait()


async def test_queue_only_agent_mail_wakes_a_sleep_inside_the_turn(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    """Not a seed port (the seed, a root asleep between turns, is ``test_sleeping_root.py``):
    the root waits in ``clock.sleep`` inside its turn, queue-only mail wakes it, and the
    mail -- persisted in the rollout as an ``agent_message`` -- reaches the next request
    together with the earlier context."""
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        bodies.append(await conn.next_request())
        await conn.send_completed("resp-initial", [sleep_call("clock-wait-1", 60_000)])
        bodies.append(await conn.next_request())
        await conn.send_final("resp-wake", "the worker is done")

    log = EventLog()
    home = tmp_path / "home"
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace, rollout=ta.RolloutConfig(home))
                                                         ) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("wait for the worker")
        await log.wait_for(lambda e: e.kind.value == "sleep.started")
        await agent.post_mail("/root/worker", "worker completed")
        assert (await turn.result()).final_message == "the worker is done"
    wake = bodies[1]
    assert "wait for the worker" in user_texts(wake)
    assert [m["content"][0]["text"] for m in wake["input"] if m.get("type") == "agent_message"] == ["worker completed"]
    history = ta.RolloutConfig(home).load_session("model-test").snapshot.history
    assert any(item.get("type") == "agent_message" and item["content"][0]["text"] == "worker completed"
               for item in history)


async def test_a_queued_prompt_wakes_a_sleeping_turn(server: FakeResponsesServer, workspace: Path) -> None:
    outputs: list[str] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_completed("resp-1", [sleep_call("nap")])
        outputs.append(output_of(await conn.next_request(), "nap"))
        await conn.send_final("resp-2", "first done")
        await conn.next_request()
        await conn.send_final("resp-3", "second done")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        first = await agent.prompt("nap for an hour")
        await log.wait_for(lambda e: e.kind.value == "sleep.started")
        second = await agent.prompt("the next thing")  # user input waits: the sleep ends
        assert (await first.result()).final_message == "first done"
        assert (await second.result()).final_message == "second done"
    assert_interrupted(outputs[0])
