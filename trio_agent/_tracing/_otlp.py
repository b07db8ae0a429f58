"""``trio-agent run --otel``: export the run's spans and metrics over OTLP (http/protobuf).

The exporter is configured by the standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``
or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``..._HEADERS``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``); without an endpoint the command says which variable to
set instead of sending to a default address. Spans go through the SDK's batch
processor (its export thread is the SDK's); the providers are shut down -- which
flushes them -- when the run ends, however it ends (Ctrl-C included).

A collector that is down must not hold the command's exit, nor fill its stderr. So,
unless the user set ``OTEL_EXPORTER_OTLP_TIMEOUT`` (or the signal's own
``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_TIMEOUT``), each export gets
:data:`EXPORT_TIMEOUT` seconds in all: shorter than the SDK's first retry backoff
(1 s, +-20 % jitter), so a refused or failing export is tried once. The final flush at
exit -- both providers' shutdown -- has :data:`SHUTDOWN_TIMEOUT` seconds in all, or
``OTEL_BSP_EXPORT_TIMEOUT`` (milliseconds: the specification's "maximum allowed time
to export data" of the batch processor, which the Python SDK reads but does not
enforce); it runs in a daemon thread that the command stops waiting for at the
deadline (the SDK's export calls cannot be interrupted), so whatever the exporter
timeouts are, a silent collector delays the exit by at most that. The exporters' own
log records (a line per retry and per failure) are kept off stderr while the run lasts
(:class:`_ExportFailures`); if any export failed or the flush ran out of time, the
command says so in one line at the end: which collector, and what was dropped.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from ._settings import Tracing

__all__ = [
    "EXPORT_TIMEOUT", "SHUTDOWN_TIMEOUT", "export_timeout", "otlp_problem", "otlp_tracing", "run_with_otlp",
    "shutdown_timeout",
]

#: Seconds one export may take, retries included, unless the environment says otherwise.
EXPORT_TIMEOUT = 0.75
#: Seconds the final flush at exit may take, unless ``OTEL_BSP_EXPORT_TIMEOUT`` (ms) says otherwise.
SHUTDOWN_TIMEOUT = 2.0
SHUTDOWN_VARIABLE = "OTEL_BSP_EXPORT_TIMEOUT"
TIMEOUTS = {"traces": ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"),
            "metrics": ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")}
_EXPORTER_LOGGER = "opentelemetry.exporter"  # the OTLP exporters' and their HTTP client's loggers

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


def export_timeout(environ: Mapping[str, str], signal: str) -> float | None:
    """The exporter's ``timeout`` for ``signal`` ("traces" or "metrics"): ``None`` (the
    SDK reads the user's variable) when one is set, else :data:`EXPORT_TIMEOUT`."""
    return None if any(environ.get(name, "").strip() for name in TIMEOUTS[signal]) else EXPORT_TIMEOUT


def shutdown_timeout(environ: Mapping[str, str]) -> float:
    """Seconds the final flush may take: ``OTEL_BSP_EXPORT_TIMEOUT`` (milliseconds, a
    non-negative number) or :data:`SHUTDOWN_TIMEOUT` (also when the value is not one:
    a typo must not make the exit wait forever)."""
    raw = environ.get(SHUTDOWN_VARIABLE, "").strip()
    try:
        millis = float(raw)
    except ValueError:
        return SHUTDOWN_TIMEOUT
    return millis / 1000 if 0 <= millis < float("inf") else SHUTDOWN_TIMEOUT


def _shut_down(providers: list[Callable[[], object]], seconds: float) -> bool:
    """Run each provider's shutdown (which flushes it) in a daemon thread; wait at most
    ``seconds`` for all of them. False: the deadline passed (what was left is dropped
    when the process exits: the thread does not hold it)."""
    def run() -> None:
        for shutdown in providers:
            shutdown()

    thread = threading.Thread(target=run, name="trio-agent-otel-shutdown", daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


class _ExportFailures(logging.Handler):
    """Takes the OTLP exporters' log records instead of stderr, and keeps which kinds of
    telemetry an export failed for ("spans", "metrics")."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.dropped: list[str] = []
        self.late: float | None = None  # the flush at exit ran out of this many seconds

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.ERROR:  # a retry on the way, or a note: not a loss yet
            return
        args = record.args if isinstance(record.args, tuple) else ()
        kind = str(args[0]) if args and args[0] in ("spans", "metrics", "logs") else "telemetry"
        if kind not in self.dropped:
            self.dropped.append(kind)

    @contextmanager
    def installed(self) -> Iterator[None]:
        logger = logging.getLogger(_EXPORTER_LOGGER)
        logger.addHandler(self)
        propagate, logger.propagate = logger.propagate, False
        try:
            yield
        finally:
            if self.late is None:  # else the flush is still running: its records stay here
                logger.removeHandler(self)
                logger.propagate = propagate

    def report(self, environ: Mapping[str, str]) -> None:
        endpoint = next((environ[name].strip() for name in reversed(TRACES_ENDPOINTS)
                         if environ.get(name, "").strip()), "?")
        if self.late is not None:
            print(f"trio-agent: the OpenTelemetry collector at {endpoint} did not take this run's telemetry within "
                  f"{self.late:g} s at exit ({SHUTDOWN_VARIABLE}, milliseconds); what was not exported was dropped",
                  file=sys.stderr, flush=True)
        elif self.dropped:
            print(f"trio-agent: the OpenTelemetry collector at {endpoint} was unreachable or refused the export; "
                  f"this run's {' and '.join(self.dropped)} were dropped", file=sys.stderr, flush=True)


@contextmanager
def otlp_tracing(environ: Mapping[str, str], failures: _ExportFailures | None = None) -> Iterator[Tracing]:
    """A ``Tracing`` exporting over OTLP for the duration of the block (then flushed,
    within ``shutdown_timeout``; ``failures.late`` is set when it was not)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "trio-agent"}))
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # shut down below, bounded
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=export_timeout(environ, "traces"))))
    meter_provider: MeterProvider | None = None
    if any(environ.get(name, "").strip() for name in METRICS_ENDPOINTS):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(OTLPMetricExporter(timeout=export_timeout(environ, "metrics")))
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
    try:
        yield Tracing(tracer_provider=tracer_provider, meter_provider=meter_provider)
    finally:
        seconds = shutdown_timeout(environ)
        shutdowns: list[Callable[[], object]] = [tracer_provider.shutdown]
        if meter_provider is not None:
            shutdowns.append(functools.partial(meter_provider.shutdown, timeout_millis=seconds * 1000))
        if not _shut_down(shutdowns, seconds) and failures is not None:
            failures.late = seconds


def run_with_otlp(run: Callable[[Tracing], int]) -> int:
    """``run(tracing)`` with OTLP export, or exit status 2 and the reason on stderr."""
    problem = otlp_problem(os.environ)
    if problem is not None:
        print(f"trio-agent: {problem}", file=sys.stderr)
        return 2
    failures = _ExportFailures()
    try:
        with failures.installed(), otlp_tracing(os.environ, failures) as tracing:
            return run(tracing)
    finally:
        failures.report(os.environ)
