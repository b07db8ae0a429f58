"""Hostile case of the thread manager's relay, which runs in the agent's own task
(``ThreadManager._listener``, issue 30 item 3): a bug relaying an event is ours, so it
must neither hide nor hit the agent. The manager fails with it, as the forwarding task
it replaced would have crashed the manager's nursery; the agent's emit returns normally,
so the turn is not failed by our bug (it ends when the manager closes the thread);
nothing is printed and swallowed.

Checked without the change: the old listener printed the bug on stderr, lost that event
and went on -- the manager's block ended normally (``DID NOT RAISE``); a listener that let
the exception out would fail the agent's turn instead (``internal error``, FAILED).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._events import AgentEvent, EventKind
from trio_agent._threads._entry import LoadedThread

from ..serve.test_thread_relay import drain, manager


async def test_a_relay_bug_fails_the_manager_not_the_turn(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    turns: list[ta.Turn] = []
    relayed_after: list[EventKind] = []
    with pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="relay bug"), flatten_subgroups=True):
        async with manager(tmp_path) as threads:
            make_relay = threads._relay_to_stream
            broken_once = False

            def broken_relay(entry: LoadedThread) -> Callable[[AgentEvent], None]:
                relay = make_relay(entry)

                def broken(event: AgentEvent) -> None:
                    nonlocal broken_once
                    if broken_once:
                        relayed_after.append(event.kind)
                    if event.kind is EventKind.MODEL_CALL_COMPLETED:
                        broken_once = True
                        raise RuntimeError("relay bug")
                    relay(event)

                return broken

            threads._relay_to_stream = broken_relay  # type: ignore[method-assign]
            agent = await threads.start(subscriber="client")
            drain(threads)
            turns.append(await agent.prompt("hello"))
            await trio.sleep(3600)  # the manager fails: its nursery cancels this (virtual time)
    assert turns[0].status in (ta.TurnStatus.COMPLETED, ta.TurnStatus.CANCELLED)  # never FAILED by our bug
    assert relayed_after == []  # the manager was going down: nothing more relayed
    assert "relay" not in capsys.readouterr().err  # raised, not printed and swallowed


async def test_a_relay_bug_while_the_thread_closes_still_fails_the_manager(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    with pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="relay bug"), flatten_subgroups=True):
        async with manager(tmp_path) as threads:
            make_relay = threads._relay_to_stream

            def broken_relay(entry: LoadedThread) -> Callable[[AgentEvent], None]:
                relay = make_relay(entry)

                def broken(event: AgentEvent) -> None:
                    if event.kind.is_terminal:
                        raise RuntimeError("relay bug")
                    relay(event)

                return broken

            threads._relay_to_stream = broken_relay  # type: ignore[method-assign]
            agent = await threads.start(subscriber="client")
            turn = await agent.prompt("hello")
            await turn.wait_running()
            # Leaving the block closes the thread: the running turn's terminal event is
            # relayed during the agent's close, after the thread's countdown has ended.
