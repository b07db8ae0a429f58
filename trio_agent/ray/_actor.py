"""``AgentActor``: the Ray actor -- one process, one Trio loop, many agents.

It is an *async* actor: Ray runs its methods as asyncio coroutines on the actor's
event loop, and each only forwards to the ``AgentHost`` on the actor's Trio thread
through the ``TrioPortal`` (see there for why and how). Each method belongs to a Ray
concurrency group, so Ray -- not this library -- bounds and queues them:

- ``agents`` (``run_tasks``): at most ``agents_per_actor`` calls at once (each starts the
  tasks the driver dispatched to this actor together; the pool never sends more tasks
  than free slots); Ray queues more;
- ``events`` (``poll``): the driver's one long poll for the whole actor;
- ``control`` (``ready``, ``cancel``, ``statistics``): never waits behind the others,
  so a cancel reaches a busy actor at once.

The actor's process is the pool's own, so it tunes its garbage collector for the
allocation pattern of many agents (``tune_collector``).
"""

from __future__ import annotations

from typing import Any

import ray

from .._collector import COLLECTOR_THRESHOLD, tune_collector
from ._host import AgentHost
from ._portal import TrioPortal
from ._values import ActorInfo, ActorStatistics, PollReply

__all__ = [
    "COLLECTOR_THRESHOLD",
    "CONTROL_CONCURRENCY",
    "POLL_CONCURRENCY",
    "AgentActor",
    "actor_class",
    "tune_collector",
]

CONTROL_CONCURRENCY = 8
POLL_CONCURRENCY = 2  # one poll in flight, and room for one that Ray is still finishing


class AgentActor:
    """Constructed by Ray in the actor's process (``actor_class(...).remote(index)``)."""

    def __init__(self, index: int) -> None:
        # Ray and this library are imported by now (``_collector``). Measured (1,000 agents on
        # 2 actors, docs/ray.md): the collector's CPU on each actor from 0.37 ms to 0.13 ms per agent.
        tune_collector()
        self._host = AgentHost(index, ray.get_runtime_context().get_node_id())
        self._portal = TrioPortal(f"trio-agent-actor-{index}")

    async def ready(self) -> ActorInfo:
        return await self._portal.call_sync(self._host.info)

    async def run_tasks(self, tasks: list[tuple[str, bytes, bool]]) -> None:
        await self._portal.call(self._host.run_tasks, tasks)

    async def poll(
        self, acks: dict[str, tuple[int, bool, bool]], paused: frozenset[str], wait: float | None
    ) -> PollReply:
        return await self._portal.call(self._host.poll, acks, paused, wait)

    async def cancel(self, task_id: str) -> None:
        await self._portal.call_sync(self._host.cancel, task_id)

    async def statistics(self) -> ActorStatistics:
        return await self._portal.call_sync(self._host.statistics)


_GROUPS = {"ready": "control", "run_tasks": "agents", "poll": "events", "cancel": "control", "statistics": "control"}
for _name, _group in _GROUPS.items():
    ray.method(concurrency_group=_group)(getattr(AgentActor, _name))  # marks the function in place


def actor_class(agents_per_actor: int) -> Any:  # a ray.actor.ActorClass (Ray is untyped here)
    """The Ray actor class with this pool's concurrency bounds."""
    groups = {"agents": agents_per_actor, "events": POLL_CONCURRENCY, "control": CONTROL_CONCURRENCY}
    return ray.remote(concurrency_groups=groups)(AgentActor)
