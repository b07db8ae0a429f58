"""The higher parts ``AgentConfig`` takes, as the configuration layer sees them.

``AgentConfig(tools=..., rollout=..., tracing=...)`` takes a ``ta.Tools``, a
``ta.RolloutConfig`` and a ``ta.Tracing``: classes of the tools layer and of the
services above the runtime, which import this layer. Its fields name them through
these protocols instead (dependency inversion; docs/architecture.md, "How the
configuration layer reaches higher layers"), each with what the layers at or below the
runtime read of the value. ``AgentConfig`` still checks, on construction, that a
rollout and a tracing value are the real classes (``_base/links.py``); the reader that
needs more of one than its protocol says narrows it at one place: the agent's parts
(``_runtime/_assembly.py``) the tools, its rollout (``_runtime/_identity.py``) the
rollout settings, the event sink (``_tracing/__init__.py``) the tracing settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = ["RolloutSettings", "ToolSet", "TracingSettings"]


class ToolSet(Protocol):
    """The tools (``AgentConfig.tools``, what ``tools_factory`` returns): a ``ta.Tools``.
    A resumed session is checked against their definitions on construction."""

    def definitions(self) -> list[dict[str, Any]]: ...


class RolloutSettings(Protocol):
    """Where the agent's rollout lives (``AgentConfig.rollout``): a ``ta.RolloutConfig``.
    (Not ``home``: the class converts it on construction, and a converted attrs field
    does not meet a protocol's property for every type checker -- pyright.)"""

    @property
    def model_provider(self) -> str | None: ...

    def find(self, thread_id: str) -> Path | None: ...


class TracingSettings(Protocol):
    """Where the agent's spans and metrics go (``AgentConfig.tracing``): a ``ta.Tracing``."""

    @property
    def tracer_provider(self) -> TracerProvider | None: ...

    @property
    def meter_provider(self) -> MeterProvider | None: ...
