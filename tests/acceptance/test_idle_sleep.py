"""``Agent.sleep``: what ends an idle agent's sleep, besides the mail of the seed's port
(``test_sleeping_root.py``). On codex's HTTP harness in memory (``_codex_http``), so that
"no further request" is a checked fact; the timer runs on ``MockClock`` where time matters.
Refusals and failures are in ``tests/faults/test_idle_sleep_faults.py``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import EventLog, FakeResponsesServer
from trio_agent.testing._http import FakeHttpRequest

from .._codex_frames import ev_assistant_message, ev_completed, ev_response_created
from ._codex_http import Requests, http_config, running, terminal_statuses

MAIL = "worker completed"


async def answer(request: FakeHttpRequest) -> None:
    await request.send_sse([ev_response_created("resp"), ev_assistant_message("msg", "ok"), ev_completed("resp")],
                           done=False)


def mails(body: dict[str, Any]) -> list[str]:
    return [item["content"][0]["text"] for item in body["input"] if item.get("type") == "agent_message"]


def woke(log: EventLog) -> list[tuple[str, int | None]]:
    return [(str(e.payload["reason"]), e.payload.get("turn_id"))  # type: ignore[misc]
            for e in log.events if e.kind is ta.EventKind.AGENT_WOKE]


async def test_a_prompt_ends_the_sleep_and_runs_with_its_own_settings(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    requests, log = Requests(memory_server, [answer] * 2), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        await (await agent.prompt("first")).result()
        sleep = await agent.sleep(60)
        assert sleep.asleep and sleep.wakeup is None and sleep.seconds == 60
        await agent.set_thinking(ta.Thinking.HIGH)
        turn = await agent.prompt("second")
        assert not sleep.asleep  # ended when the prompt was accepted
        wakeup = await sleep.woken()
        assert wakeup.reason == "turn" and wakeup.turn is not None and wakeup.turn.turn_id == turn.turn_id
        await turn.result()
    assert [body["reasoning"]["effort"] for body in requests.bodies] == ["medium", "high"]
    assert woke(log) == [("turn", 2)]


async def test_mail_waiting_when_the_sleep_is_asked_for_wakes_it_at_once(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    requests, log = Requests(memory_server, [answer]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        assert await agent.post_mail("/root/worker", MAIL) is None  # awake and idle: it waits
        sleep = await agent.sleep(60)
        assert not sleep.asleep
        wakeup = await sleep.woken()
        assert wakeup.reason == "mail" and wakeup.turn is not None
        await wakeup.turn.result()
    (body,) = requests.bodies
    assert mails(body) == [MAIL]
    assert woke(log) == [("mail", 1)]


async def test_a_sleep_that_times_out_leaves_the_agent_awake_and_mail_waiting(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    requests, log = Requests(memory_server, [answer]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        sleep = await agent.sleep(5)  # (scripted() allows the block 10 s of Trio time)
        start = trio.current_time()
        wakeup = await sleep.woken()
        assert wakeup.reason == "timeout" and wakeup.turn is None
        assert trio.current_time() - start == 5 and wakeup.slept == 5
        assert await agent.post_mail("/root/worker", MAIL) is None  # awake: queue-only mail waits again
        await trio.testing.wait_all_tasks_blocked()
        assert requests.bodies == []
        await (await agent.prompt("next")).result()
    (body,) = requests.bodies
    assert mails(body) == [MAIL]  # delivered with the next turn
    assert woke(log) == [("timeout", None)]
    assert next(e.payload for e in log.events if e.kind is ta.EventKind.AGENT_WOKE)["slept_ns"] == 5 * 10**9


async def test_a_cancelled_sleep_leaves_mail_waiting(memory_server: FakeResponsesServer, workspace: Path) -> None:
    requests, log = Requests(memory_server, []), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        sleep = await agent.sleep(math.inf)
        await sleep.cancel()
        await sleep.cancel()  # ended already: nothing
        assert (await sleep.woken()).reason == "cancelled"
        assert await agent.post_mail("/root/worker", MAIL) is None
        await trio.testing.wait_all_tasks_blocked()
    assert requests.bodies == []
    assert woke(log) == [("cancelled", None)]
    assert [e.payload for e in log.events if e.kind is ta.EventKind.AGENT_ASLEEP] == [{"seconds": None}]


async def test_closing_the_agent_ends_its_sleep_at_once(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Leaving the block does not wait for the sleep's hour: the sleep ends as the queue
    closes, its timer task with it (on the mock clock, a timer left running would jump
    the clock an hour and end as a timeout)."""
    requests, log = Requests(memory_server, []), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        sleep = await agent.sleep(3600)
        start = trio.current_time()
    wakeup = await sleep.woken()
    assert wakeup.reason == "closed" and trio.current_time() == start
    assert woke(log) == [("closed", None)]
    assert terminal_statuses(log) == []


async def test_each_sleep_ends_once_and_a_later_one_can_be_woken_again(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    requests, log = Requests(memory_server, [answer] * 3), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        sleep = await agent.sleep(60)
        woken = await agent.post_mail("/root/worker", "first report")
        assert woken is not None
        await woken.result()
        assert (await sleep.woken()).reason == "mail"
        assert await agent.post_mail("/root/worker", "while awake") is None  # awake again: it waits
        sleep = await agent.sleep(60)  # the waiting mail wakes this one at once
        wakeup = await sleep.woken()
        assert wakeup.reason == "mail" and wakeup.turn is not None
        await wakeup.turn.result()
        sleep = await agent.sleep(60)
        woken = await agent.post_mail("/root/worker", "third report", trigger_turn=True)
        assert woken is not None
        await woken.result()
    assert [mails(body)[-1] for body in requests.bodies] == ["first report", "while awake", "third report"]
    assert [len(mails(body)) for body in requests.bodies] == [1, 2, 3]  # each mail once (full replays)
    assert woke(log) == [("mail", 1), ("mail", 2), ("mail", 3)]
    assert terminal_statuses(log) == ["completed"] * 3
