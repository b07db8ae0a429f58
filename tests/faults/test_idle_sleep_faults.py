"""Hostile cases of an idle agent's sleep (``Agent.sleep``, issue 27 item 4) and of mail
waiting when a turn starts (item 3): a sleep refused while a turn runs or is queued,
twice, with a bad duration, or while the agent closes; mail to a sleeping agent that is
closing; a wake-up turn that fails or is cancelled (its mail recorded once, never lost,
never resent as new input); a turn that fails or is cancelled with the mail it took at
its start. On codex's HTTP harness in memory (full replays: every request shows the
whole history, so "once" is countable)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import EventLog, FakeResponsesServer
from trio_agent.testing._http import FakeHttpRequest

from .._codex_frames import ev_assistant_message, ev_completed, ev_response_created
from ..acceptance._codex_http import Requests, http_config, running, terminal_statuses

MAIL = "worker completed"
QUOTA = {"type": "response.failed", "response": {"id": "failed", "status": "failed", "error": {
    "code": "insufficient_quota", "message": "quota exhausted"}}}


async def answer(request: FakeHttpRequest) -> None:
    await request.send_sse([ev_response_created("resp"), ev_assistant_message("msg", "ok"), ev_completed("resp")],
                           done=False)


async def quota(request: FakeHttpRequest) -> None:
    await request.send_sse([QUOTA], done=False)


def mail_count(items: list[dict[str, Any]]) -> int:
    return sum(1 for item in items if item.get("type") == "agent_message"
               and item.get("content") == [{"type": "input_text", "text": MAIL}])


def recorded(path: Path) -> list[dict[str, Any]]:
    """Every history item the rollout recorded, in order."""
    return [line["payload"] for line in map(json.loads, path.read_text().splitlines())
            if line["type"] == "response_item"]


def kinds(log: EventLog, *wanted: ta.EventKind) -> list[ta.EventKind]:
    return [e.kind for e in log.events if e.kind in wanted]


async def test_sleep_is_refused_while_a_turn_runs_or_is_queued(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    asked, release = trio.Event(), trio.Event()

    async def held(request: FakeHttpRequest) -> None:
        asked.set()
        await release.wait()
        await answer(request)

    requests, log = Requests(memory_server, [held, answer]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        first = await agent.prompt("first")
        await asked.wait()
        with pytest.raises(ta.SleepRefused, match="only an idle agent can sleep, and turn 1 is running; wait"):
            await agent.sleep(60)
        second = await agent.prompt("second")
        with pytest.raises(ta.SleepRefused, match="turn 1 is running and 1 turn is queued"):
            await agent.sleep(60)
        assert await agent.post_mail("/root/worker", MAIL) is None  # busy and awake: it waits
        release.set()
        await first.result()
        await second.result()
    assert kinds(log, ta.EventKind.AGENT_ASLEEP, ta.EventKind.AGENT_WOKE) == []
    assert terminal_statuses(log) == ["completed", "completed"]
    assert mail_count(requests.bodies[1]["input"]) == 1  # the refused sleeps changed nothing


async def test_a_second_sleep_is_refused_and_the_first_still_wakes_once(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    requests, log = Requests(memory_server, [answer]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        sleep = await agent.sleep(60)
        with pytest.raises(ta.SleepRefused, match="asleep already"):
            await agent.sleep(60)
        assert sleep.asleep
        woken = await agent.post_mail("/root/worker", MAIL)
        assert woken is not None
        await woken.result()
        assert await agent.post_mail("/root/worker", "later") is None  # one wake-up only: awake now
        await trio.testing.wait_all_tasks_blocked()
    assert len(requests.bodies) == 1
    assert kinds(log, ta.EventKind.AGENT_ASLEEP, ta.EventKind.AGENT_WOKE) == [
        ta.EventKind.AGENT_ASLEEP, ta.EventKind.AGENT_WOKE]


@pytest.mark.parametrize("seconds", [0, -1, math.nan, -math.inf, True, "5", None])
async def test_a_bad_duration_is_refused_and_changes_nothing(
    memory_server: FakeResponsesServer, workspace: Path, seconds: Any
) -> None:
    requests, log = Requests(memory_server, []), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        with pytest.raises(ta.ConfigError, match="sleep takes a number of seconds above 0"):
            await agent.sleep(seconds)
        assert await agent.post_mail("/root/worker", MAIL) is None  # not asleep: it waits
        await trio.testing.wait_all_tasks_blocked()
    assert requests.bodies == []
    assert kinds(log, ta.EventKind.AGENT_ASLEEP, ta.EventKind.AGENT_WOKE) == []


async def test_mail_to_a_sleeping_agent_that_is_closing_is_refused_and_starts_nothing(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    """The block closes while the agent sleeps: the sleep ends ("closed") and from then
    on mail cannot reach it (``AgentClosed``), nor can it sleep again."""
    refused: list[str] = []
    requests, log = Requests(memory_server, []), EventLog()

    async def late_sender(agent: ta.Agent, sleep: ta.Sleep) -> None:
        assert (await sleep.woken()).reason == "closed"
        with pytest.raises(ta.AgentClosed) as mail_error:
            await agent.post_mail("/root/worker", MAIL)
        with pytest.raises(ta.AgentClosed) as sleep_error:
            await agent.sleep(60)
        refused.extend([str(mail_error.value), str(sleep_error.value)])

    async with trio.open_nursery() as outer:
        async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
            outer.start_soon(late_sender, agent, await agent.sleep(3600))
    assert len(refused) == 2 and "cannot be delivered" in refused[0]
    assert requests.bodies == [] and terminal_statuses(log) == []


async def test_a_wake_up_turn_that_fails_records_its_mail_once(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    config = http_config(memory_server, workspace, rollout=ta.RolloutConfig(home))
    requests, log = Requests(memory_server, [answer, quota, answer]), EventLog()
    async with running(memory_server, requests, config, log) as agent:
        await (await agent.prompt("wait for the worker")).result()
        await agent.sleep(60)
        woken = await agent.post_mail("/root/worker", MAIL)
        assert woken is not None
        with pytest.raises(ta.TurnFailed) as failed:
            await woken.result()
        assert isinstance(failed.value.responses_error, ta.UsageLimitExceeded)
        await trio.testing.wait_all_tasks_blocked()
        assert len(requests.bodies) == 2  # nothing retried it: no turn of its own for the mail
        await agent.flush_rollout()
        assert agent.rollout is not None
        assert mail_count(recorded(agent.rollout.path)) == 1  # recorded by the failed turn, once
        await (await agent.prompt("go on")).result()
        await agent.flush_rollout()
        assert mail_count(recorded(agent.rollout.path)) == 1
    assert [mail_count(body["input"]) for body in requests.bodies] == [0, 1, 1]  # the replay carries the one copy
    assert terminal_statuses(log) == ["completed", "failed", "completed"]


async def test_a_cancelled_wake_up_turn_keeps_its_mail_once(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    asked, release = trio.Event(), trio.Event()

    async def held(request: FakeHttpRequest) -> None:
        await request.start_stream()
        asked.set()
        await release.wait()  # never answered: the turn is cancelled meanwhile

    requests, log = Requests(memory_server, [held, answer]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        await agent.sleep(60)
        woken = await agent.post_mail("/root/worker", MAIL)
        assert woken is not None
        await asked.wait()
        await woken.cancel()
        release.set()
        with pytest.raises(ta.TurnCancelled):
            await woken.result()
        await trio.testing.wait_all_tasks_blocked()
        later = await (await agent.prompt("go on")).result()
    assert mail_count(later.snapshot().history) == 1
    assert [mail_count(body["input"]) for body in requests.bodies] == [1, 1]
    assert "<turn_aborted>" in json.dumps(requests.bodies[1]["input"])
    assert terminal_statuses(log) == ["cancelled", "completed"]
    assert kinds(log, ta.EventKind.AGENT_WOKE) == [ta.EventKind.AGENT_WOKE]


@pytest.mark.parametrize("ending", ["failed", "cancelled"])
async def test_mail_taken_when_a_user_turn_starts_is_kept_once_when_the_turn_ends_badly(
    memory_server: FakeResponsesServer, workspace: Path, ending: str
) -> None:
    """Item 3's hostile side: the mail joined the first request of a turn that then
    failed (quota) or was cancelled mid-request; history holds it once, the next turn's
    full replay carries that one copy, and nothing sends it as new input again."""
    asked, release = trio.Event(), trio.Event()

    async def held(request: FakeHttpRequest) -> None:
        await request.start_stream()
        asked.set()
        await release.wait()

    first = quota if ending == "failed" else held
    requests, log = Requests(memory_server, [first, answer]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        assert await agent.post_mail("/root/worker", MAIL) is None
        turn = await agent.prompt("do the task")
        if ending == "cancelled":
            await asked.wait()
            await turn.cancel()
            release.set()
        with pytest.raises(ta.TurnFailed if ending == "failed" else ta.TurnCancelled):
            await turn.result()
        later = await (await agent.prompt("go on")).result()
    assert [mail_count(body["input"]) for body in requests.bodies] == [1, 1]
    assert mail_count(later.snapshot().history) == 1
    assert terminal_statuses(log) == [ending, "completed"]
