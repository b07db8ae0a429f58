"""The pump passes by at once an agent event that makes no message (``_items.silent``):
an event whose kind the mapper does not map, and an ``api.event`` frame other than
``response.completed`` -- 16 of a warm 10-delta turn's 31 events, each of which went
through the mapping and a publish of nothing (issue 30, item 3).

``silent`` must be sound: whatever it passes by maps to nothing, in a running turn
with a message open. Checked without the change: the pump handed the mapper every
event of the turn (31 where the test wants the 15 that are not silent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent import AgentEvent, EventKind
from trio_agent._serve import _heard, _items
from trio_agent._serve._heard import makes_messages, silent
from trio_agent._serve._items import ThreadMapper, UserInput

from ._harness import app_server, run_turn, start_thread
from .test_mapping import event, mapper

FRAMES = ["response.created", "response.output_item.added", "response.output_text.delta",
          "response.output_item.done", "response.in_progress"]


def _running() -> ThreadMapper:
    m = mapper()
    m.accept_turn(1, UserInput("hi"))
    m.on_event(event(EventKind.RUN_STARTED))
    m.on_event(event(EventKind.ASSISTANT_DELTA, item_id="msg-1", text="Hel"))
    return m


@pytest.mark.parametrize("kind", list(EventKind))
def test_a_silent_kind_maps_to_nothing_in_a_running_turn(kind: EventKind) -> None:
    quiet = event(kind)
    if silent(quiet):
        assert _running().on_event(quiet) == []
    else:
        assert kind in _heard.MAPPED or kind is EventKind.API_EVENT


@pytest.mark.parametrize("frame", FRAMES)
def test_frames_other_than_completed_are_silent(frame: str) -> None:
    quiet = event(EventKind.API_EVENT, direction="inbound", event={"type": frame, "response": {"output": []}})
    assert silent(quiet) and _running().on_event(quiet) == []


def test_a_completed_frame_and_every_mapped_kind_are_heard() -> None:
    completed = {"type": "response.completed", "response": {"output": []}}
    assert not silent(event(EventKind.API_EVENT, direction="inbound", event=completed))
    assert silent(event(EventKind.API_EVENT, direction="outbound", event=completed))
    for kind in (EventKind.RUN_STARTED, EventKind.RUN_COMPLETED, EventKind.RUN_FAILED, EventKind.ASSISTANT_DELTA,
                 EventKind.TOOL_CALL, EventKind.TOOL_RESULT, EventKind.APPROVAL_REQUESTED, EventKind.RUN_STEERED):
        assert not silent(event(kind))


async def test_the_pump_maps_only_what_is_not_silent(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapped: list[AgentEvent] = []
    on_event = ThreadMapper.on_event

    def counted(self: ThreadMapper, agent_event: AgentEvent) -> Any:
        mapped.append(agent_event)
        return on_event(self, agent_event)

    monkeypatch.setattr(ThreadMapper, "on_event", counted)
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await run_turn(client, thread_id, "hello")
        assert mapped and not any(silent(agent_event) for agent_event in mapped)
        assert {agent_event.kind for agent_event in mapped} >= {EventKind.RUN_STARTED, EventKind.RUN_COMPLETED}


def test_the_kinds_heard_are_the_kinds_the_mapper_handles() -> None:
    """``_heard.HANDLED`` is written out (``_heard`` does not import ``_items``): it must
    be exactly ``_items._HANDLERS``' kinds, or an event the mapper handles would be left
    out by the relay (or one it ignores relayed for nothing)."""
    assert frozenset(_items._HANDLERS) == _heard.HANDLED
    for kind in EventKind:
        for quiet in (event(kind), event(kind, direction="inbound", event={"type": "response.completed"})):
            assert makes_messages(quiet) is not silent(quiet)
