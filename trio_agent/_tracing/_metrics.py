"""The GenAI client metrics: token usage, operation duration and time to first chunk.

Names, units, attributes and bucket boundaries are the OpenTelemetry GenAI
conventions' (``gen_ai.client.*``, histograms with their advised explicit buckets).
A series is keyed by the conventions' attributes -- operation, provider, request and
response model, server address and port, ``error.type`` on failures -- plus, on the
first-chunk histogram only, this library's ``trio_agent.warmup.path`` and
``trio_agent.transport`` (what a warmup path changes is the point of that histogram).
The warmup request is no GenAI operation of the user's and is not measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _names as n

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter

__all__ = ["GenAIMetrics"]

#: The conventions' advised buckets (``gen_ai-metrics``): seconds, and token counts.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
FIRST_CHUNK_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)

_SERIES_KEYS = (n.PROVIDER, n.REQUEST_MODEL, n.RESPONSE_MODEL, n.SERVER_ADDRESS, n.SERVER_PORT)


class GenAIMetrics:
    """The three histograms on ``meter`` (the same name on the same meter returns the
    instrument already registered, so every agent of a provider shares them)."""

    def __init__(self, meter: Meter) -> None:
        self.duration = meter.create_histogram(
            n.DURATION_METRIC, unit="s", description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.tokens = meter.create_histogram(
            n.TOKEN_USAGE_METRIC, unit="{token}", description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
        )
        self.first_chunk = meter.create_histogram(
            n.FIRST_CHUNK_METRIC, unit="s",
            description="Time to receive the first chunk, from when the request was sent (connecting, backoff "
                        "and waiting for the warmup excluded), by warmup path",
            explicit_bucket_boundaries_advisory=list(FIRST_CHUNK_BUCKETS),
        )

    @staticmethod
    def series(operation: str, attributes: n.Attributes) -> n.Attributes:
        """The conventions' attributes of one operation, from its span's."""
        found: n.Attributes = {n.OPERATION: operation}
        for key in _SERIES_KEYS:
            if key in attributes:
                found[key] = attributes[key]
        return found

    def operation(self, series: n.Attributes, seconds: float, error_type: str | None) -> None:
        self.duration.record(seconds, series if error_type is None else {**series, n.ERROR_TYPE: error_type})

    def usage(self, series: n.Attributes, found: n.Attributes) -> None:
        """``gen_ai.client.token.usage`` of a response's usage attributes
        (``n.usage_attributes``: none without a ``usage``)."""
        for token_type, key in (("input", n.USAGE_INPUT), ("output", n.USAGE_OUTPUT)):
            value = found.get(key)
            if isinstance(value, int):
                self.tokens.record(value, {**series, n.TOKEN_TYPE: token_type})
