"""Hostile case of serve's pump (issue 30, item 3): most events -- deltas, items, usage --
now take a short path (``Pump._deliver_plain``: mapped and published without an await),
the others the full one. A bug mapping an event on either path loses that event's
notifications alone: it is reported on stderr, the turn still completes for the client,
and the next turn is served (the pump did not die with it).

Checked by mutation: without the short path's ``except`` the pump task dies with the
bug and the turn's ``turn/completed`` never comes (the test's deadline fails it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent import AgentEvent, EventKind
from trio_agent._serve._items import ThreadMapper

from ..serve._harness import app_server, run_turn, start_thread


@pytest.mark.parametrize("kind", [EventKind.ASSISTANT_DELTA, EventKind.RUN_STARTED])
async def test_a_mapping_bug_loses_that_events_messages_alone(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], kind: EventKind,
) -> None:
    on_event = ThreadMapper.on_event
    broken: list[EventKind] = []

    def buggy(self: ThreadMapper, event: AgentEvent) -> Any:
        if event.kind is kind and not broken:
            broken.append(event.kind)
            raise RuntimeError("a mapping bug")
        return on_event(self, event)

    monkeypatch.setattr(ThreadMapper, "on_event", buggy)
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        first = await run_turn(client, thread_id, "hello")
        second = await run_turn(client, thread_id, "again")
    assert broken == [kind]
    assert second["turn"]["status"] == "completed"
    if kind is EventKind.ASSISTANT_DELTA:  # the message's item still comes from the completed response
        assert first["turn"]["status"] == "completed"
    err = capsys.readouterr().err
    assert "internal error mapping agent of thread" in err and "a mapping bug" in err
