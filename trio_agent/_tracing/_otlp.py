"""``trio-agent run --otel``: export the run's spans and metrics over OTLP (http/protobuf).

The exporter is configured by the standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``
or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``..._HEADERS``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``); without an endpoint the command says which variable to
set instead of sending to a default address. Spans go through the SDK's batch
processor (its export thread is the SDK's); the providers are shut down -- which
flushes them -- when the run ends, however it ends (Ctrl-C included).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from ._settings import Tracing

__all__ = ["otlp_problem", "otlp_tracing", "run_with_otlp"]

TRACES_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
METRICS_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def otlp_problem(environ: Mapping[str, str]) -> str | None:
    """Why ``--otel`` cannot export with this environment (None: it can)."""
    if not any(environ.get(name, "").strip() for name in TRACES_ENDPOINTS):
        return (
            "--otel exports over OTLP/HTTP: set OTEL_EXPORTER_OTLP_ENDPOINT (for example "
            "http://localhost:4318) or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        )
    protocol = next((environ[name] for name in PROTOCOLS if environ.get(name, "").strip()), "http/protobuf")
    if protocol.strip() != "http/protobuf":
        return (f"--otel exports with the http/protobuf protocol only; unset OTEL_EXPORTER_OTLP_PROTOCOL "
                f"(got {protocol})")
    try:
        import opentelemetry.exporter.otlp.proto.http
        import opentelemetry.sdk  # noqa: F401 - only checks that they are installed
    except ImportError:
        return "--otel needs the OpenTelemetry SDK and OTLP exporter: pip install 'trio-agent[otel]'"
    return None


@contextmanager
def otlp_tracing(environ: Mapping[str, str]) -> Iterator[Tracing]:
    """A ``Tracing`` exporting over OTLP for the duration of the block (then flushed)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "trio-agent"}))
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider: MeterProvider | None = None
    if any(environ.get(name, "").strip() for name in METRICS_ENDPOINTS):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    try:
        yield Tracing(tracer_provider=tracer_provider, meter_provider=meter_provider)
    finally:
        tracer_provider.shutdown()
        if meter_provider is not None:
            meter_provider.shutdown()


def run_with_otlp(run: Callable[[Tracing], int]) -> int:
    """``run(tracing)`` with OTLP export, or exit status 2 and the reason on stderr."""
    problem = otlp_problem(os.environ)
    if problem is not None:
        print(f"trio-agent: {problem}", file=sys.stderr)
        return 2
    with otlp_tracing(os.environ) as tracing:
        return run(tracing)
