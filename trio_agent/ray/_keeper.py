"""``ActorKeeper``: the pool's actors over the pool's life -- started on entry, replaced
when one dies, killed on exit.

Theory of operation. The pool keeps its size: when an actor is lost (its process was
killed or crashed, its node died, or it failed to serve its poll), its tasks end as
LOST through its link (``ActorLink``) as before, and the keeper starts a new actor at
the same pool index. Tasks waiting for a slot wait for the replacement instead of
failing (``Slots.restarting``); a task that was on the lost actor is not re-run -- its
agent's tools would run again -- and resumes from its rollout with
``task.resumed(...)``, on whichever actor takes it.

Replacements are bounded: at most ``max_restarts`` in any ``restart_window`` seconds for
the whole pool, so a task that crashes every actor it reaches (or a node that cannot
start one) does not become a crash loop; past the bound the lost actor stays lost and
the pool runs smaller. Every loss, replacement and refusal is reported: a WARNING on
the ``trio_agent.ray`` logger (shown on stderr by Python's last-resort handler when the
application configured no logging) and ``PoolStatistics.restarts``.

The old actor is killed before its replacement starts: an actor that only failed its
poll may still hold its CPU reservation (and its agents' tools).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import ray
import trio

from .. import __version__
from .._errors import ConfigError
from ._dispatch import Slot, Slots
from ._errors import ActorLost
from ._link import ActorLink
from ._refs import PendingRef
from ._values import ActorInfo

__all__ = ["ActorKeeper", "kill", "start_actor"]

logger = logging.getLogger("trio_agent.ray")


async def start_actor(cls: Any, options: dict[str, object], index: int, handles: list[Any]) -> Slot:
    """Create the actor for pool index ``index`` and wait until it answers (the caller
    bounds the wait). Its handle goes to ``handles`` at once, to be killed on exit."""
    handle = cls.options(**options).remote(index)
    handles.append(handle)
    try:
        info: ActorInfo = await PendingRef(handle.ready.remote()).wait()
    except Exception as exc:  # Ray's error: the actor could not be created
        raise ActorLost(f"actor {index} of the pool failed to start: {exc}", actor=index) from None
    if info.version != __version__:
        raise ConfigError(
            f"actor {index} runs trio_agent {info.version} but this driver runs {__version__}; install "
            "the same version on the cluster's workers (runtime_env, see docs/ray.md)"
        )
    return Slot(index, handle, info)


def kill(handles: Iterable[Any]) -> None:
    for handle in handles:
        try:
            ray.kill(handle)
        except Exception:  # already gone (or Ray is shutting down): nothing to kill
            pass


class ActorKeeper:
    """See the module docstring. ``run()`` in the pool's outer nursery until ``close()``."""

    def __init__(self, cls: Any, options: dict[str, object], slots: Slots, handles: list[Any], *,
                 max_restarts: int, restart_window: float, startup_timeout: float) -> None:
        self._cls = cls
        self._options = options
        self.slots = slots
        self.handles = handles  # every actor ever created: all killed on exit
        self._max = max_restarts
        self._window = restart_window
        self._patience = startup_timeout
        self._links = {slot: ActorLink(slot, self.lost) for slot in slots.all}
        self._times: list[float] = []  # when each replacement was started
        self._scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._closing = False
        self.restarts = 0

    def link_of(self, slot: Slot) -> ActorLink:
        return self._links[slot]

    async def run(self) -> None:
        """Serve the links and the replacements until ``close()``."""
        with self._scope:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for link in self._links.values():
                    nursery.start_soon(link.run)
                await trio.sleep_forever()

    def close(self) -> None:
        """Stop every link (they are shielded) and any replacement under way."""
        self._closing = True
        for link in self._links.values():
            link.close()
        self._scope.cancel()

    def lost(self, slot: Slot) -> None:
        """``slot``'s actor is gone: no task goes there again; replace it within the bound."""
        if not slot.alive:
            return
        if self._closing or self._nursery is None:
            self.slots.lost(slot)
            return
        now = trio.current_time()
        self._times = [at for at in self._times if now - at < self._window]
        if len(self._times) >= self._max:
            self.slots.lost(slot)
            logger.warning(
                "trio_agent.ray: actor %d (pid %d) died and is not replaced: the pool already replaced %d actor(s) "
                "in the last %g s (max_restarts=%d, restart_window=%g); %d of %d actors are left",
                slot.index, slot.info.pid, len(self._times), self._window, self._max, self._window,
                self.slots.live, len(self.slots.all))
            return
        self._times.append(now)
        self.slots.restarting += 1  # first: the tasks waiting for a slot wait for the replacement
        self.slots.lost(slot)
        self._nursery.start_soon(self._replace, slot)

    async def _replace(self, old: Slot) -> None:
        kill([old.handle])
        new: Slot | None = None
        mine: list[Any] = []
        try:
            with trio.move_on_after(self._patience):
                new = await start_actor(self._cls, self._options, old.index, mine)
            if new is None:
                raise ActorLost(f"it did not start within {self._patience} s (is there room on the cluster "
                                f"for it? actor_options={self._options!r})", actor=old.index)
        except (ActorLost, ConfigError) as exc:
            logger.warning("trio_agent.ray: actor %d (pid %d) died and its replacement failed: %s; %d of %d "
                           "actors are left", old.index, old.info.pid, exc, self.slots.live, len(self.slots.all))
            kill(mine)
            self.slots.gave_up()
            return
        except BaseException:  # the pool is closing
            self.slots.gave_up()
            raise
        finally:
            self.handles.extend(mine)
        self.restarts += 1
        link = self._links[new] = ActorLink(new, self.lost)
        assert self._nursery is not None
        self._nursery.start_soon(link.run)
        self.slots.replace(new)
        logger.warning("trio_agent.ray: actor %d (pid %d) died; replaced by pid %d (replacement %d of at most %d "
                       "in %g s)", old.index, old.info.pid, new.info.pid, len(self._times), self._max, self._window)
