"""``ta.Tracing``: the switch that turns on OpenTelemetry tracing for an agent.

Constructing one imports the OpenTelemetry API (the ``[otel]`` extra); nothing else in
``trio_agent`` does until an agent is opened with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import attrs

from .._errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = ["Tracing"]


@final
@attrs.frozen(eq=False)
class Tracing:
    """Trace agents with OpenTelemetry: ``AgentConfig(tracing=ta.Tracing())``.

    Every agent opened with this config (its forks, spawned children and workers
    included) reports spans for its lifetime, each turn, each model call and attempt,
    each tool call and each compaction, and records the GenAI conventions' client
    metrics -- token usage, operation duration, time to first chunk (see
    ``docs/tracing.md`` for the span tree, the attribute table and the metrics).

    ``tracer_provider`` / ``meter_provider``: where spans and metrics go; ``None`` means
    OpenTelemetry's global providers (``opentelemetry.trace.set_tracer_provider``),
    looked up when each agent opens. The value pickles when its providers do (``None``
    always): on a Ray pool the actors trace with theirs (``docs/ray.md``).

    ``turn_traces``: a turn with no application span to hang under starts a trace of
    its own (linked to the agent span) instead of joining the agent's trace, so each
    turn's trace is whole -- and can be viewed -- when the turn ends, not when the
    agent closes.

    ``capture_content``: also record prompts, instructions, tool definitions, model
    output and tool arguments and results on the spans (off by default; ``None`` reads
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), redacted and cut to 32,768
    characters each (``docs/tracing.md``).

    ``detailed_attributes``: also put on the turn and model-call spans what only
    restates another span or a default (off by default: each attribute is work for the
    SDK on every turn): the agent's path and transport and the turn's reasoning effort,
    instruction size, last response id and zero counters on the turn; the transport,
    phase, previous response id, ``completed`` status, a first-attempt answer's attempt
    count, limit, replay mode and socket generation on a call. The conventions'
    attributes are always there (``docs/tracing.md`` has the table). Needs ``pip install 'trio-agent[otel]'``
    (``ConfigError`` otherwise). Tracing never changes what the agent does; an internal
    error of the tracer stops tracing that agent with a ``RuntimeWarning``.

    What a turn's end asks of the SDK (its model calls' spans, the turn span's end,
    the metric recordings) runs when the process next idles -- at the latest a second
    later, after ~64 turns or when the agent closes; ``await agent.flush_telemetry()`` hands it to the
    providers at once (``docs/tracing.md``, *When spans reach the exporter*).
    """

    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    capture_content: bool | None = None
    turn_traces: bool = False
    detailed_attributes: bool = False

    def captures_content(self) -> bool:
        """``capture_content``, or when it is None the conventions' environment variable
        ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (read now)."""
        from ._content import env_captures

        return self.capture_content if self.capture_content is not None else env_captures()

    def __attrs_post_init__(self) -> None:
        try:
            import opentelemetry.metrics
            import opentelemetry.trace  # noqa: F401 - only checks that the API is installed
        except ImportError:
            raise ConfigError(
                "tracing needs the OpenTelemetry API: pip install 'trio-agent[otel]' "
                "(opentelemetry-api, plus opentelemetry-sdk to export spans)"
            ) from None
        if self.capture_content is not None and not isinstance(self.capture_content, bool):
            raise ConfigError(f"Tracing(capture_content=...) must be True, False or None (the environment "
                              f"variable decides), got {type(self.capture_content).__name__}")
        for flag in ("turn_traces", "detailed_attributes"):
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise ConfigError(f"Tracing({flag}=...) must be True or False, got {type(value).__name__}")
        for name, method in (("tracer_provider", "get_tracer"), ("meter_provider", "get_meter")):
            value = getattr(self, name)
            if value is not None and not callable(getattr(value, method, None)):
                raise ConfigError(
                    f"Tracing({name}=...) must be an OpenTelemetry {name.replace('_', ' ')} (with {method}()), "
                    f"got {type(value).__name__}; pass None for the global one"
                )
