"""A loaded thread's idle-unload watcher (``_threads._entry.idle_watch``) is woken by the
start and the end of a turn, not by every event inside it: while a turn runs it only
waits for the turn to end, and each wake was a task switch (and a ``statistics()``)
per burst of every running thread's events (issue 30, item 3). While its countdown
runs, any event still restarts it.

Checked without the change (``nudge`` waking the watcher as ``touch`` does): 10 more
looks at the agent's state, where the test wants none.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import trio
import trio.testing

from trio_agent._runtime import Agent, TurnStatus
from trio_agent._threads._entry import LoadedThread, idle_watch


class _Agent:
    """What ``LoadedThread`` reads of an agent: ``statistics()`` (counted)."""

    def __init__(self) -> None:
        self.running = False
        self.looks = 0

    def statistics(self) -> Any:
        self.looks += 1
        return SimpleNamespace(running_turn=1 if self.running else None, turns_queued=0,
                               last_turn_status=TurnStatus.COMPLETED)


async def test_events_inside_a_turn_do_not_wake_the_watcher(autojump_clock: trio.testing.MockClock) -> None:
    entry = LoadedThread("t", ephemeral=False, unload_delay=10.0)
    agent = _Agent()
    entry.agent = cast(Agent, agent)
    agent.running = True
    async with trio.open_nursery() as nursery:
        nursery.start_soon(idle_watch, entry)
        await trio.testing.wait_all_tasks_blocked()
        looks = agent.looks
        for _ in range(10):  # a turn's events, each burst its own scheduler pass
            entry.nudge()
            await trio.testing.wait_all_tasks_blocked()
        assert agent.looks == looks
        agent.running = False
        entry.touch()  # the terminal event: the watcher looks, and counts down
        await trio.testing.wait_all_tasks_blocked()
        assert agent.looks > looks and entry.counting
        nursery.cancel_scope.cancel()


async def test_an_event_restarts_a_running_countdown(autojump_clock: trio.testing.MockClock) -> None:
    entry = LoadedThread("t", ephemeral=False, unload_delay=10.0)
    entry.agent = cast(Agent, _Agent())
    unloaded_at: list[float] = []

    async def watch() -> None:
        await idle_watch(entry)
        unloaded_at.append(trio.current_time())

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        await trio.sleep(9)
        entry.nudge()  # an event while idle: the countdown starts again
        await trio.sleep(9)
        assert unloaded_at == []
    assert unloaded_at == [start + 19]
    assert not entry.counting


async def test_turn_edges_do_not_wake_a_watcher_held_by_subscribers(autojump_clock: trio.testing.MockClock) -> None:
    """A subscribed thread's watcher only waits for its subscribers to leave: a turn's
    start and end (``turn_edge``) change nothing it checks, so it is not woken -- two
    task switches per turn of every subscribed thread (issue 30, item 3). Unsubscribing
    still wakes it, and with no subscriber a turn's end does. Checked without the change
    (``touch`` at the edges): the watcher's event was set (and replaced) at every edge."""
    entry = LoadedThread("t", ephemeral=False, unload_delay=10.0)
    agent = _Agent()
    entry.agent = cast(Agent, agent)
    entry.subscribers.add("client")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(idle_watch, entry)
        await trio.testing.wait_all_tasks_blocked()
        looks, changed = agent.looks, entry.changed  # what the watcher waits on
        for _ in range(3):  # three turns: start and end each
            agent.running = True
            entry.turn_edge()
            await trio.testing.wait_all_tasks_blocked()
            agent.running = False
            entry.turn_edge()
            await trio.testing.wait_all_tasks_blocked()
        assert entry.changed is changed and not changed.is_set() and not entry.counting
        agent.running = True
        entry.subscribers.clear()
        entry.touch()  # the client unsubscribes while a turn runs: the watcher waits for its end
        await trio.testing.wait_all_tasks_blocked()
        assert agent.looks > looks and not entry.counting
        agent.running = False
        entry.turn_edge()  # the turn's end, nobody subscribed: the countdown starts
        await trio.testing.wait_all_tasks_blocked()
        assert entry.counting
        nursery.cancel_scope.cancel()


async def test_a_child_turn_edge_wakes_an_unsubscribed_parent(autojump_clock: trio.testing.MockClock) -> None:
    """A parent stays loaded while a child works; when the child's turn ends, a parent
    with no subscriber must hear it even if the child itself is subscribed."""
    parent = LoadedThread("p", ephemeral=False, unload_delay=10.0)
    child = LoadedThread("c", ephemeral=False, unload_delay=10.0)
    parent.agent = cast(Agent, _Agent())
    child_agent = _Agent()
    child.agent = cast(Agent, child_agent)
    child.parent = parent
    parent.children.add(child)
    child.subscribers.add("client")
    child_agent.running = True
    async with trio.open_nursery() as nursery:
        nursery.start_soon(idle_watch, parent)
        await trio.testing.wait_all_tasks_blocked()
        assert not parent.counting  # the child works
        child_agent.running = False
        child.turn_edge()
        await trio.testing.wait_all_tasks_blocked()
        assert parent.counting
        nursery.cancel_scope.cancel()
