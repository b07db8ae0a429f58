"""Hostile case of the thread manager's relay, which runs in the agent's own task
(``ThreadManager._listener``, issue 30 item 3): a bug relaying one event is said on
stderr and costs the manager that event alone -- the agent's turn goes on and ends with
its terminal event, and the events after it are relayed.

Checked without the guard: the relay's exception leaves ``EventSink.emit`` inside the
agent's turn, which fails (``internal error``) instead of completing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._events import AgentEvent, EventKind

from ..serve.test_thread_relay import drain, manager, statuses_and_turn_edges


async def test_a_relay_bug_loses_one_event_not_the_turn(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with manager(tmp_path) as threads:
        relay = threads._relay

        def broken(entry: object, event: AgentEvent) -> None:
            if event.kind is EventKind.MODEL_CALL_COMPLETED:
                raise RuntimeError("relay bug")
            relay(entry, event)  # type: ignore[arg-type]

        threads._relay = broken  # type: ignore[method-assign]
        agent = await threads.start(subscriber="client")
        drain(threads)
        result = await (await agent.prompt("hello")).result()
        assert result.final_message == "Done"
        await trio.testing.wait_all_tasks_blocked()
        heard = drain(threads)
        kinds = [event.event.kind for event in heard if event.event is not None]
        assert EventKind.MODEL_CALL_COMPLETED not in kinds and EventKind.RUN_COMPLETED in kinds
        assert statuses_and_turn_edges(heard) == ["run.started", "active", "run.completed", "idle"]
        assert threads.status(agent.session_id) is ta.ThreadStatus.IDLE
    assert "internal error relaying model.call.completed" in capsys.readouterr().err
