"""OpenTelemetry tracing of agents (optional: the ``[otel]`` extra).

Tracing is an add-on on the observer seam (``_runtime/_observers.py``): for a root
agent whose config has ``tracing=``, the package face's add-on (``_wiring.py``) opens a
``TracingTree``, which makes an ``AgentTracer`` (``_observer``) for each agent of the
tree -- its agent span starts then, as a child of the span current in the opening
task. The tracer reads the agent's events, synchronously in the emitting task, and
is told in the accepting task of each accepted turn (the span current there becomes
the turn's parent); everything else is derived from the events.

Importing this package imports no OpenTelemetry module: ``Tracing`` (``_settings``) does
when it is constructed, ``_observer`` when a traced agent opens. Neither is imported
with the runtime: an agent without tracing never needs them. ``_propagation`` carries
the trace context across a process boundary (``trio_agent.ray``).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._runtime._observers import AgentSite
    from ._observer import AgentTracer
    from ._settings import Tracing

__all__ = ["TracingTree"]


class TracingTree:
    """Tracing attached to one agent tree (an ``Attachment``): the tracers of its agents,
    by session id, so that a fork's or child's agent span links to its parent's."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing
        self.agents: dict[str, AgentTracer] = {}

    def observe(self, site: AgentSite) -> AgentTracer | None:
        """A new tracer for the agent (its agent span starts now, as a child of the span
        current in the calling task); None -- the agent runs untraced, with a warning --
        when it cannot start (a provider that fails)."""
        from ._observer import AgentTracer  # lazy: the first OpenTelemetry import

        try:
            return AgentTracer(site, self)
        except Exception as exc:
            warnings.warn(f"trio_agent: tracing is off for agent session {site.config.session_id}: the tracer "
                          f"could not start ({exc!r})", RuntimeWarning, stacklevel=2)
            return None

    def close(self) -> None:
        pass  # every tracer ended its own spans when its agent closed
