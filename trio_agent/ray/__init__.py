"""trio_agent.ray: run many agents on a pool of Ray actors, with the same structured
cancellation, rollouts and events as in one process (``pip install 'trio-agent[ray]'``).

::

    import ray, trio, trio_agent as ta
    from trio_agent.ray import AgentTask, open_ray_pool

    async def main() -> None:
        async with open_ray_pool(num_actors=2, agents_per_actor=64) as pool:
            tasks = [AgentTask(ta.AgentConfig(auth=key), prompts=[p]) for p in prompts]
            for result in await pool.map(tasks):
                print(result.status, result.final_message)

    ray.init()
    trio.run(main)

See ``docs/ray.md``. Importing ``trio_agent`` never imports Ray; importing this
subpackage does.
"""

from __future__ import annotations

try:
    import ray as _ray  # noqa: F401  # the extra's dependency, checked with a clear message
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError("trio_agent.ray needs Ray: pip install 'trio-agent[ray]'") from exc

from ._blocking import BlockingRayPool as BlockingRayPool
from ._blocking import TaskRef as TaskRef
from ._blocking import blocking_ray_pool as blocking_ray_pool
from ._errors import ActorLost as ActorLost
from ._errors import PoolClosed as PoolClosed
from ._errors import TaskCancelled as TaskCancelled
from ._errors import TaskCrashed as TaskCrashed
from ._pool import RayPool as RayPool
from ._pool import open_ray_pool as open_ray_pool
from ._remote import RemoteTask as RemoteTask
from ._values import ActorInfo as ActorInfo
from ._values import ActorStatistics as ActorStatistics
from ._values import AgentTask as AgentTask
from ._values import PoolStatistics as PoolStatistics
from ._values import TaskBody as TaskBody
from ._values import TaskEvent as TaskEvent
from ._values import TaskResult as TaskResult
from ._values import TaskStatus as TaskStatus

__all__ = [
    "ActorInfo",
    "ActorLost",
    "ActorStatistics",
    "AgentTask",
    "BlockingRayPool",
    "PoolClosed",
    "PoolStatistics",
    "RayPool",
    "RemoteTask",
    "TaskBody",
    "TaskCancelled",
    "TaskCrashed",
    "TaskEvent",
    "TaskRef",
    "TaskResult",
    "TaskStatus",
    "blocking_ray_pool",
    "open_ray_pool",
]


def _own_public_names() -> None:
    # Public names report this package as their module (as trio_agent's do), after
    # attrs has resolved their string annotations where they were written. Classes
    # keep pickling: pickle finds them here by name.
    import inspect

    import attrs

    for name in __all__:
        value = globals()[name]
        if not isinstance(value, type) and not inspect.isfunction(value):
            continue  # TaskBody: a type alias
        if isinstance(value, type) and attrs.has(value):
            try:
                attrs.resolve_types(value)
            except NameError:
                pass  # annotations naming TYPE_CHECKING-only types stay unresolved
        if getattr(value, "__module__", "").startswith("trio_agent.ray."):
            value.__module__ = __name__


_own_public_names()
