"""Port of codex ``queue_only_agent_mail_wakes_sleeping_root_with_previous_turn_context``
(``seeds/codex_pending_input_tests.rs.txt``; codex.md 3.2: queue-only mail "is delivered
with the next turn, or wakes a durable sleep").

The seed's root finishes its turn ("wait for the worker", an empty completion) and is
then *asleep between turns*: a durable, thread-level sleep (the seed's
``SleepingRootExtension`` puts a ``SleepItem {id: "clock-wait-1", duration_ms: 60000}``
into the thread's store). Queue-only mail from ``/root/worker`` then wakes that idle root
into a new turn, which runs with the previous turn's context (both requests carry the
first turn's ``access_programs``), and the mail is in the persisted history.

trio_agent has neither half yet (issue 27 item 4): ``clock.sleep`` lives inside a turn
(``test_sleep.py``), nothing puts an idle agent to sleep, and queue-only mail to an idle
agent waits for the next turn someone else starts -- it never starts one (only
triggering mail does). Asleep or not matters: the seeds' other cases post queue-only mail
to an idle root and expect it to wait (``terminal_compaction_error...[pre_turn_mail]``,
``idle_response_items_include_pending_mailbox_in_first_request``), so only a sleeping
root may be woken.

The port therefore names the entry point it needs, ``await agent.sleep(seconds)``: the
idle agent sleeps (the seed's 60 s) until new input wakes it. If the feature lands under
another name, change that one line. Where the seed's facts map:

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

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import EventLog, FakeResponsesServer
from trio_agent.testing._http import FakeHttpRequest

from .._codex_frames import ev_completed, ev_response_created
from ._codex_http import Requests, http_config, running, terminal_statuses

CHILD_MESSAGE = "worker completed"


@pytest.mark.xfail(strict=True, reason=(
    "issue 27 item 4: no sleeping idle root -- nothing puts an idle agent to sleep (Agent.sleep is missing) and "
    "queue-only mail to an idle agent never starts a turn, so no wake-up turn with the previous turn's settings"))
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
        await agent.sleep(60)  # type: ignore[attr-defined]
        assert await agent.post_mail("/root/worker", CHILD_MESSAGE) is None  # queue-only
        # wait_for_turn_complete: all in memory, so once every task is blocked the
        # wake-up turn has run to its end (or never started).
        await trio.testing.wait_all_tasks_blocked()
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
