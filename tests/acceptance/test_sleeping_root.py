"""Port of codex ``queue_only_agent_mail_wakes_sleeping_root_with_previous_turn_context``
(``seeds/codex_pending_input_tests.rs.txt``; codex.md 3.2: queue-only mail "is delivered
with the next turn, or wakes a durable sleep").

The seed's root finishes its turn ("wait for the worker", an empty completion) and is
then *asleep between turns*: a durable, thread-level sleep (the seed's
``SleepingRootExtension`` puts a ``SleepItem {id: "clock-wait-1", duration_ms: 60000}``
into the thread's store). Queue-only mail from ``/root/worker`` then wakes that idle root
into a new turn, which runs with the previous turn's context (both requests carry the
first turn's ``access_programs``), and the mail is in the persisted history.

Here the idle root is put to sleep with ``await agent.sleep(seconds)`` (issue 27 item 4;
``_runtime/_turns/_idle_sleep.py``) after its first turn, for the seed's 60 s; while it
sleeps, any mail wakes it into a new automatic turn, run with the settings the turn
before the sleep was accepted with. Asleep or not matters: the seeds' other cases post
queue-only mail to an idle root and expect it to wait (``terminal_compaction_error...
[pre_turn_mail]``, ``idle_response_items_include_pending_mailbox_in_first_request``), so
only a sleeping root is woken. Where the seed's facts map:

- ``on_start(cyber_access_program: Standard)``, a per-turn start option the wake-up turn
  takes from the previous turn, has no counterpart; the per-turn settings here are what
  a prompt captures when accepted (thinking and fast mode, SPEC sec. 2). The first turn
  runs with both away from the config's (``Thinking.HIGH``, fast mode on) and both
  requests must carry them: ``vec![json!({"cyber": "standard"}); 2]`` becomes two
  requests with effort ``high`` and ``service_tier: "priority"``.
- ``load_history(include_archived)`` is the rollout (``load_session``), every
  ``agent_message`` of it.
- The seed's harness is HTTP with ``store: false`` (ChatGPT auth): ``_codex_http``.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import EventLog, FakeResponsesServer
from trio_agent.testing._http import FakeHttpRequest

from .._codex_frames import ev_completed, ev_response_created
from ._codex_http import Requests, http_config, running, terminal_statuses

CHILD_MESSAGE = "worker completed"


async def test_queue_only_agent_mail_wakes_sleeping_root_with_previous_turn_context(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    async def initial(request: FakeHttpRequest) -> None:
        await request.send_sse([ev_response_created("resp-initial"), ev_completed("resp-initial")], done=False)

    async def wake(request: FakeHttpRequest) -> None:
        await request.send_sse([ev_response_created("resp-wake"), ev_completed("resp-wake")], done=False)

    home = tmp_path / "home"
    config = http_config(memory_server, workspace, thinking=ta.Thinking.LOW, rollout=ta.RolloutConfig(home))
    requests, log = Requests(memory_server, [initial, wake]), EventLog()
    async with running(memory_server, requests, config, log) as agent:
        # The first turn's own settings (the seed's on_start options).
        await agent.set_thinking(ta.Thinking.HIGH)
        await agent.set_fast_mode(True)
        first = await agent.prompt("wait for the worker")
        await first.result()  # wait_for_turn_complete
        # SleepingRootExtension: the idle root sleeps (60 s) until new input arrives.
        sleep = await agent.sleep(60)
        woken = await agent.post_mail("/root/worker", CHILD_MESSAGE)  # queue-only: it wakes the root
        assert isinstance(woken, ta.Turn)  # the wake-up turn
        # wait_for_turn_complete: all in memory, so once every task is blocked the
        # wake-up turn has run to its end (or never started).
        await trio.testing.wait_all_tasks_blocked()
        assert woken.status is ta.TurnStatus.COMPLETED
        wakeup = await sleep.woken()
        assert wakeup.reason == "mail" and wakeup.turn is not None and wakeup.turn.turn_id == woken.turn_id == 2
        session_id = agent.session_id

    assert terminal_statuses(log) == ["completed", "completed"]
    assert len(requests.bodies) == 2
    # vec![json!({"cyber": "standard"}); 2]: both requests run with the first turn's settings.
    assert [(body["reasoning"]["effort"], body.get("service_tier")) for body in requests.bodies] == [
        ("high", "priority")] * 2
    # The wake-up request carries the mail.
    assert [item["content"] for item in requests.bodies[1]["input"] if item.get("type") == "agent_message"] == [
        [{"type": "input_text", "text": CHILD_MESSAGE}]]
    history = ta.RolloutConfig(home).load_session(session_id).snapshot.history
    assert any(item.get("type") == "agent_message"
               and item.get("content") == [{"type": "input_text", "text": CHILD_MESSAGE}]
               for item in history)


async def test_the_wake_up_turn_keeps_the_previous_turns_settings_not_those_changed_since(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    """"Previous turn context": the settings the turn before the sleep was accepted with,
    even when the agent's settings changed after it (before the sleep and during it);
    the changed ones apply to the prompt accepted after the wake-up."""

    async def answer(request: FakeHttpRequest) -> None:
        await request.send_sse([ev_response_created("resp"), ev_completed("resp")], done=False)

    config = http_config(memory_server, workspace, thinking=ta.Thinking.LOW)
    requests, log = Requests(memory_server, [answer] * 3), EventLog()
    async with running(memory_server, requests, config, log) as agent:
        await agent.set_thinking(ta.Thinking.HIGH)
        await agent.set_fast_mode(True)
        await (await agent.prompt("wait for the worker")).result()
        await agent.set_thinking(ta.Thinking.MINIMAL)  # after the turn, before the sleep
        sleep = await agent.sleep(60)
        await agent.set_fast_mode(False)  # during the sleep
        await agent.set_model("gpt-later")
        woken = await agent.post_mail("/root/worker", CHILD_MESSAGE)
        assert woken is not None
        await woken.result()
        assert (await sleep.woken()).reason == "mail"
        await (await agent.prompt("and now")).result()

    assert [(body["model"], body["reasoning"]["effort"], body.get("service_tier")) for body in requests.bodies] == [
        ("gpt-5.4", "high", "priority"), ("gpt-5.4", "high", "priority"), ("gpt-later", "minimal", None)]
    asleep = [e.payload for e in log.events if e.kind is ta.EventKind.AGENT_ASLEEP]
    woke = [e.payload for e in log.events if e.kind is ta.EventKind.AGENT_WOKE]
    assert asleep == [{"seconds": 60.0}]
    assert [(p["reason"], p.get("turn_id")) for p in woke] == [("mail", 2)]
    kinds = [(e.kind, e.turn_id) for e in log.events if e.kind in (ta.EventKind.AGENT_WOKE, ta.EventKind.RUN_STARTED)]
    assert kinds == [(ta.EventKind.RUN_STARTED, 1), (ta.EventKind.AGENT_WOKE, None), (ta.EventKind.RUN_STARTED, 2),
                     (ta.EventKind.RUN_STARTED, 3)]


async def test_a_sleep_before_any_turn_wakes_with_the_settings_current_when_it_began(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    """No turn ran before the sleep: the wake-up turn takes the agent's settings as they
    were when ``sleep`` was called (a change during the sleep is for later prompts)."""

    async def answer(request: FakeHttpRequest) -> None:
        await request.send_sse([ev_response_created("resp"), ev_completed("resp")], done=False)

    config = http_config(memory_server, workspace, thinking=ta.Thinking.LOW)
    requests, log = Requests(memory_server, [answer]), EventLog()
    async with running(memory_server, requests, config, log) as agent:
        await agent.set_thinking(ta.Thinking.MEDIUM)
        await agent.sleep(60)
        await agent.set_thinking(ta.Thinking.HIGH)
        woken = await agent.post_mail("/root/worker", CHILD_MESSAGE, trigger_turn=True)  # either kind wakes it
        assert woken is not None
        await woken.result()
    (body,) = requests.bodies
    assert body["reasoning"]["effort"] == "medium"
    assert [item["content"] for item in body["input"] if item.get("type") == "agent_message"] == [
        [{"type": "input_text", "text": CHILD_MESSAGE}]]
