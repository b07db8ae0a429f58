"""Exact ports of codex ``pending_input.rs`` seeds (``seeds/codex_pending_input_tests.rs.txt``):
injected items after a final answer, the conditional interrupt, idle input, and a steer
during retry backoff.

How codex's harness maps onto ours:

- The seeds' mock server is plain HTTP/SSE (``start_mock_server`` and
  ``start_streaming_sse_server``), and codex sends ``store: false`` there, so every
  request replays the whole history. The ports run the HTTPS transport with
  ``store=False`` and no ``history=`` (FULL_REPLAY is derived, SPEC sec. 6) on the
  in-memory seam, so "no further request" is a checked fact, not a timeout.
- ``start_or_steer_turn`` is ``agent.submit``, ``start_turn_if_idle`` is
  ``agent.start_if_idle``, ``inject_if_running``/``inject_response_items`` are
  ``agent.inject``, ``interrupt_if_no_pending_input`` is the method of that name.
- ``TurnComplete``/``TurnAborted`` are the turn's one terminal event with ``status``
  ``completed``/``cancelled``. ``assert_root_turn(request, turn_id)`` (the request's
  ``client_metadata.turn_id``) becomes: the request's ``model.attempt.started`` event
  carries that turn's id (our requests carry no turn id on the wire).
- ``Feature::InstantInterrupt`` (a steer preempts the response or the retry sleep) is
  ``turn.steer(text, interrupt=True)``; without it a steer is ``agent.submit``.
- ``wait_for_reasoning_item_started`` waits for the inbound
  ``response.output_item.added`` reasoning frame (an ``api.event``): its frame has been
  applied to the turn when the event is emitted.

The frames are the seeds' ``core_test_support::responses`` helpers, byte for byte
(``_codex_frames``; ``sse()`` bodies end without ``[DONE]``, as codex's do).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer
from trio_agent.testing._http import FakeHttpRequest

from .._codex_frames import (
    ev_completed,
    ev_message_item_added,
    ev_output_text_delta,
    ev_reasoning_item,
    ev_reasoning_item_added,
    ev_response_created,
    message_input_texts,
    request_turns,
    sse_failed,
    user_message_item,
)
from ..conftest import EventLog, scripted
from ._codex_http import Requests, finish, http_config, is_reasoning_added, running, stream, terminal_statuses

# -- injected_response_item_reopens_turn_after_final_answer ------------------------------

INITIAL_PROMPT = "first prompt"
INJECTED_CONTEXT = "late injected context"
EXTERNAL_CONTEXT = "external injected context"


async def test_injected_response_item_reopens_turn_after_final_answer(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    """Supersedes ``test_pending_input.py::test_injected_items_reopen_a_turn_whose_final_answer_is_in_flight``."""
    gate_completed = trio.Event()
    final_answer = {
        "type": "response.output_item.done",
        "item": {"type": "message", "role": "assistant", "id": "msg-1",
                 "content": [{"type": "output_text", "text": "first answer"}], "phase": "final_answer"},
    }

    async def first(request: FakeHttpRequest) -> None:
        await stream(request, [
            ev_response_created("resp-1"), ev_message_item_added("msg-1", ""), ev_output_text_delta("first answer"),
            final_answer,
            # Keep the response open past an observable event so the answer boundary is
            # established before the late context is injected.
            ev_reasoning_item_added("reason-after-final", ["done"]),
        ])
        await gate_completed.wait()
        await finish(request, [ev_reasoning_item("reason-after-final", ["done"], []), ev_completed("resp-1")])

    async def second(request: FakeHttpRequest) -> None:
        await request.send_sse([ev_response_created("resp-2"), ev_completed("resp-2")], done=False)

    requests, log = Requests(memory_server, [first, second]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        submitted = await agent.submit(INITIAL_PROMPT)
        assert submitted.kind == "started"
        await log.wait_for(is_reasoning_added)
        # The final answer is out before anything is injected.
        assert [e.payload.get("phase") for e in log.events if e.kind is ta.EventKind.ASSISTANT_MESSAGE] == [
            "final_answer"
        ]
        assert await agent.inject([user_message_item(INJECTED_CONTEXT)]) == "joined"  # inject_if_running: Ok
        assert await agent.inject([user_message_item(EXTERNAL_CONTEXT)]) == "joined"  # inject_response_items
        gate_completed.set()
        await submitted.turn.result()

    assert len(requests.bodies) == 2
    # Both requests belong to the turn the prompt started (assert_root_turn).
    assert request_turns(log) == [submitted.turn.turn_id] * 2
    assert terminal_statuses(log) == ["completed"]
    relevant = [t for t in message_input_texts(requests.bodies[1], "user")
                if t in (INITIAL_PROMPT, INJECTED_CONTEXT, EXTERNAL_CONTEXT)]
    assert relevant == [INITIAL_PROMPT, INJECTED_CONTEXT, EXTERNAL_CONTEXT]


# -- interrupt_if_no_pending_input_checks_turn_and_queue ---------------------------------

PENDING_PROMPT = "preserve this pending input"

CONDITIONAL_INTERRUPT_CASES = ["current_turn_without_pending_input", "stale_turn", "pending_user_input",
                               "pending_mailbox", "abandoned_request"]


@pytest.mark.parametrize("case", CONDITIONAL_INTERRUPT_CASES)
async def test_interrupt_if_no_pending_input_checks_turn_and_queue(
    memory_server: FakeResponsesServer, workspace: Path, case: str
) -> None:
    """Supersedes ``test_pending_input.py::test_interrupt_if_no_pending_input_checks_the_turn_and_the_queue``
    (its ``current_turn``, ``stale_turn`` and ``pending_steer`` cases; ``queued_prompt``
    is not a seed case and stays there) and the ``pending_mailbox`` case that
    ``test_mailbox.py`` checked only as far as the boolean. ``submit_queue_only_agent_mail``
    is ``post_mail`` (queue-only) from the seed's ``/root/worker``."""
    release_response = trio.Event()

    async def first(request: FakeHttpRequest) -> None:
        await stream(request, [ev_response_created("resp-1"), ev_reasoning_item_added("reason-1", ["thinking"])])
        await release_response.wait()
        # An aborted turn has closed this stream already: the seed ignores that send too.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await finish(request, [ev_reasoning_item("reason-1", ["thinking"], []), ev_completed("resp-1")])

    async def second(request: FakeHttpRequest) -> None:
        await request.send_sse([ev_response_created("resp-2"), ev_completed("resp-2")], done=False)

    requests, log = Requests(memory_server, [first, second]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        submitted = await agent.submit(INITIAL_PROMPT)
        assert submitted.kind == "started"
        turn_id = submitted.turn.turn_id
        await log.wait_for(is_reasoning_added)
        if case == "pending_user_input":
            steered = await agent.submit(PENDING_PROMPT)  # steer_user_input: must steer
            assert steered.kind == "steered" and steered.turn.turn_id == turn_id
        if case == "pending_mailbox":
            assert await agent.post_mail("/root/worker", PENDING_PROMPT) is None  # queue-only: starts nothing
        # The seed's stale id is "stale-{turn_id}"; ours are ints, so: an id no turn has.
        stale = turn_id + 1000
        expected_turn_id = stale if case in ("stale_turn", "abandoned_request") else turn_id
        if case == "abandoned_request":
            # The seed drops the reply receiver before the request is handled. In Trio
            # the caller abandons the call by being cancelled: a cancelled call must
            # interrupt nothing.
            with trio.CancelScope() as abandoned:
                abandoned.cancel()
                await agent.interrupt_if_no_pending_input(turn_id)
            assert abandoned.cancelled_caught
            # The seed then waits for the abandoned request to be handled with a stale one.
            assert await agent.interrupt_if_no_pending_input(expected_turn_id) is False
        should_abort = case == "current_turn_without_pending_input"
        with trio.fail_after(10):
            assert await agent.interrupt_if_no_pending_input(expected_turn_id) is should_abort
        release_response.set()
        if should_abort:
            with pytest.raises(ta.TurnCancelled):
                await submitted.turn.result()
        else:
            await submitted.turn.result()

    # TurnAborted (and no TurnComplete) when it aborted; TurnComplete otherwise.
    assert terminal_statuses(log) == (["cancelled"] if should_abort else ["completed"])
    if case == "pending_user_input":
        assert len(requests.bodies) == 2
        prompts = [t for t in message_input_texts(requests.bodies[1], "user") if t in (INITIAL_PROMPT, PENDING_PROMPT)]
        assert prompts == [INITIAL_PROMPT, PENDING_PROMPT]
    elif case == "pending_mailbox":
        assert len(requests.bodies) == 2
        (mail,) = [item for item in requests.bodies[1]["input"] if item.get("type") == "agent_message"]
        assert mail["content"] == [{"type": "input_text", "text": PENDING_PROMPT}]
    else:
        assert len(requests.bodies) == 1


# -- idle_user_input_reaches_the_first_model_request -------------------------------------
#
# ``idle_user_input_reaches_the_first_model_request_in_plan_mode`` is not ported: trio_agent
# has no plan mode. Codex's plan mode is a collaboration mode (``ModeKind::Plan``, set with
# ``ThreadSettingsOverrides.collaboration_mode``) under which the agent plans instead of
# acting and ``start_turn_if_idle`` declines automatic, empty-input work (``PlanMode``);
# nothing here has modes: ``trio-agent serve`` lists no collaboration modes
# (``collaborationMode/list`` answers ``[]``) and refuses plan-mode methods (docs/app-server.md,
# "What differs from codex"), and the Python API has no mode setting. A port would need
# that mode first. The ``thinking_changed_while_idle`` case below is not that seed; it
# checks the nearest thing that exists -- a turn-policy change made while idle is used by
# the turn idle user input starts -- and is named for what it checks.

IDLE_TEXT = "queued user input reaches the first request"


@pytest.mark.parametrize("settings_change", ["none", "thinking_changed_while_idle"])
async def test_idle_user_input_reaches_the_first_model_request(
    memory_server: FakeResponsesServer, workspace: Path, settings_change: str
) -> None:
    """``idle_user_input_reaches_the_first_model_request`` (the ``none`` case).

    The seed's caller-chosen ``client_id`` ("queued-user-message"), echoed on the user
    message's ``ItemCompleted``, has no counterpart (trio_agent names client items
    itself); its other fact -- the user message recorded with exactly the input -- is
    checked on the committed history.
    """

    async def only(request: FakeHttpRequest) -> None:
        await request.send_sse([ev_response_created("idle-user-input"), ev_completed("idle-user-input")], done=False)

    requests, log = Requests(memory_server, [only]), EventLog()
    async with running(memory_server, requests, http_config(memory_server, workspace), log) as agent:
        if settings_change == "thinking_changed_while_idle":
            await agent.set_thinking(ta.Thinking.HIGH)
        turn = await agent.start_if_idle(IDLE_TEXT)
        assert isinstance(turn, ta.Turn)  # StartIfIdleSubmission::Started
        result = await turn.result()

    assert terminal_statuses(log) == ["completed"]
    expected_content = [{"type": "input_text", "text": IDLE_TEXT}]
    recorded = [item for item in result.snapshot().history
                if item.get("role") == "user" and item.get("content") == expected_content]
    assert len(recorded) == 1 and isinstance(recorded[0].get("id"), str)
    (request,) = requests.bodies  # response.single_request()
    assert request_turns(log) == [turn.turn_id]
    assert IDLE_TEXT in message_input_texts(request, "user"), (
        "the first Responses request should contain the queued user message"
    )
    assert request["reasoning"]["effort"] == ("high" if settings_change == "thinking_changed_while_idle" else "medium")


# -- steer_during_stream_retry_skips_backoff ---------------------------------------------


@pytest.mark.parametrize("transport", [ta.Transport.HTTPS, ta.Transport.WEBSOCKET])
async def test_steer_during_stream_retry_skips_backoff(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock,
    transport: ta.Transport,
) -> None:
    """Supersedes ``test_steering.py::test_steer_during_stream_retry_skips_backoff``.

    The seed's frame carries no ``retry_after``: the 60 s come from its message alone
    (codex.md sec. 1.6). ``stream_max_retries = 1`` is ``max_attempts=2``. The seed runs
    over HTTP; the WebSocket case sends the same frame on a socket (after the warmup).
    Under ``MockClock`` a wait of the server's 60 s would show as virtual time.
    """
    failed = sse_failed("resp-failed", "rate_limit_exceeded", "Rate limit exceeded. Please try again in 60s.")
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        if transport is ta.Transport.HTTPS:
            first = await memory_server.accept_http()
            bodies.append(first.body)
            await first.send_sse([failed], done=False)
            retry = await memory_server.accept_http()
            bodies.append(retry.body)
            await retry.send_sse([ev_response_created("resp-follow-up"), ev_completed("resp-follow-up")], done=False)
        else:
            conn = await memory_server.accept()
            await conn.next_request()
            await conn.send_warmup("resp-warmup")
            bodies.append(await conn.next_request())
            await conn.send(failed)
            retry_conn = await memory_server.accept()  # a failed response drops its socket
            bodies.append(await retry_conn.next_request())
            await retry_conn.send_all([ev_response_created("resp-follow-up"), ev_completed("resp-follow-up")])

    if transport is ta.Transport.HTTPS:
        config = http_config(memory_server, workspace, max_attempts=2)
    else:
        responses = ta.Responses(profile=ta.Profile.OPENAI,
                                 websocket_url=memory_server.url, dialer=memory_server.dial, max_attempts=2)
        config = ta.AgentConfig(auth="test-key", model="gpt-5.4", workspace=workspace, responses=responses)
    log = EventLog()
    async with scripted(script, 100) as nursery:
        async with ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            submitted = await agent.submit("first prompt")
            retrying = await log.wait_for(lambda e: e.kind is ta.EventKind.MODEL_ATTEMPT_RETRYING)  # StreamError
            assert retrying.payload["delay_ns"] == 60_000_000_000  # read from the message
            assert retrying.payload["server_requested_delay"] is True
            start = trio.current_time()
            await submitted.turn.steer("second prompt", interrupt=True)  # InstantInterrupt
            # Completion must not wait for the server's 60-second retry delay.
            with trio.fail_after(10):
                await submitted.turn.result()
            assert trio.current_time() - start == 0.0
    assert terminal_statuses(log) == ["completed"]
    assert len(bodies) == 2
    prompts = [t for t in message_input_texts(bodies[1], "user") if t in ("first prompt", "second prompt")]
    assert prompts == ["first prompt", "second prompt"]
