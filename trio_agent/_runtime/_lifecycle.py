"""The block of one agent: its nursery, from startup to the end of its event stream.

``run_agent(origin, create)`` is what ``open_agent`` (and every child's opening) runs:
it opens the agent tree's add-ons when it is a root (``_observers``: tracing, a
cassette), starts the sandbox trial,
opens the agent's nursery, starts the first connection of a root opened with
``warmup=False`` there (``_early_start``: a WebSocket's handshake on its way, or
HTTPS's TCP connect; the agent is built while the answer travels),
builds the agent in it (``create``), starts it, yields
it, then waits for its accepted turns. An error or a cancellation in the block cancels
the nursery instead. Shutdown runs shielded, bounded by ``SHUTDOWN_GRACE``. Only once
every task of the agent has ended (terminal events of cancelled turns included) are
the rollout closed and the event stream ended (which closes the agent's observers),
then the add-ons a root opened (a cassette's end line). An
error that is alone in the nursery's group propagates as itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs
import trio

from .._config import AgentConfig, Transport
from .._tools._sandbox import start_probe
from ._observers import Attachment, close_attachments, open_attachments

if TYPE_CHECKING:
    from .._events import EventSink
    from .._transport._early_dial import EarlyDial
    from ._children import Origin
    from ._model._connections import EarlyLink

__all__ = ["SHUTDOWN_GRACE", "run_agent"]

SHUTDOWN_GRACE = 5.0  # closing sockets, cells and shell sessions on the way out


class LivingAgent(Protocol):
    """What the block drives of an agent (``Agent``'s lifecycle methods)."""

    @property
    def _sink(self) -> EventSink: ...

    async def _startup(self) -> None: ...

    async def _wait_turns(self) -> None: ...

    async def _shutdown(self) -> None: ...

    def _close_rollout(self) -> None: ...


A = TypeVar("A", bound=LivingAgent)


@asynccontextmanager
async def run_agent(origin: Origin, create: Callable[[Origin, trio.Nursery], A]) -> AsyncIterator[A]:
    sinks: list[EventSink] = []
    agents: list[A] = []
    owned: tuple[Attachment, ...] = ()
    config = origin.config
    if origin.attachments is None:  # a root: what its config attaches (ConfigError if it cannot)
        owned = open_attachments(config)
        origin = attrs.evolve(origin, attachments=owned)
    start_probe(config.sandbox)  # the sandbox trial runs while the agent is built (_tools/_sandbox.py)
    try:
        async with trio.open_nursery() as nursery:
            if not origin.attachments and _early_eligible(origin):
                origin = attrs.evolve(origin, early=await _early_start(config, nursery))
            agent = create(origin, nursery)
            sinks.append(agent._sink)
            agents.append(agent)
            try:
                await agent._startup()
                yield agent
                await agent._wait_turns()
            except BaseException:
                nursery.cancel_scope.cancel()  # an error or cancellation in the block: stop the turns
                raise
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_GRACE):
                    await agent._shutdown()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            raise group.exceptions[0] from None
        raise
    finally:
        # Only now, with every task of the agent finished (terminal events of cancelled
        # turns included), are the rollout closed and the event stream ended.
        for agent in agents:
            agent._close_rollout()
        for sink in sinks:
            sink.close()
        close_attachments(owned)  # a cassette's end line: after every task of the tree recorded its last frame


def _early_eligible(origin: Origin) -> bool:
    """``open_agent(config, warmup=False)`` -- a caller whose first prompt is in hand,
    waiting on the first connection (``trio-agent run``) -- of a root with no add-on
    (none would see an early connection: their tap is made with the agent), neither a
    fork nor a resumed session (seeded): its first connection starts before the agent
    is built. Everything else connects as before, once built (an agent that its
    construction refuses -- a locked rollout, an unavailable sandbox -- never connects);
    an early connection is closed at once when the construction fails."""
    return not origin.warmup and origin.seed is None and origin.parent_id is None and origin.config.resume is None


async def _early_start(config: AgentConfig, nursery: trio.Nursery) -> EarlyLink | EarlyDial | None:
    """Start the agent's first connection in its nursery. A WebSocket: return once the
    handshake's first bytes are out (or the attempt ended), its round trip then runs
    while the agent is built (``EarlyLink``). HTTPS with the agent's own client: the
    TCP connect (``EarlyDial``; None where it does not apply)."""
    from .._transport._early_dial import start_early_dial

    if config.responses.transport is Transport.WEBSOCKET:
        from ._model._connections import EarlyLink

        # its TCP connect first (an IP literal's SYN leaves now), then the transport's import
        dial = None if config.responses.dialer else start_early_dial(nursery, config.websocket_url, None,
                                                                       httpx_errors=False)
        early = EarlyLink(config, nursery, dial)
        nursery.start_soon(early.run)
        await early.sent.wait()
        return early
    if config.responses.http_client is not None:
        return None
    return start_early_dial(nursery, config.api_base_url, config.responses.dialer)
