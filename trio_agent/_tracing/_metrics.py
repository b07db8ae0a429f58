"""The GenAI client metrics: token usage, operation duration and time to first chunk.

Names, units, attributes and bucket boundaries are the OpenTelemetry GenAI
conventions' (``gen_ai.client.*``, histograms with their advised explicit buckets).
A series is keyed by the conventions' attributes -- operation, provider, request and
response model, server address and port, ``error.type`` on failures -- plus, on the
first-chunk histogram only, this library's ``trio_agent.warmup.path`` and
``trio_agent.transport`` (what a warmup path changes is the point of that histogram).
The warmup request is no GenAI operation of the user's and is not measured.

Every recording's attribute mapping is built once per agent and series (``Series``,
cached by the series' values) and handed to the SDK as is: the SDK copies and hashes
it per recording anyway, so building it per call was our cost on top of the SDK's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _names as n

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Meter

__all__ = ["GenAIMetrics", "Series"]

#: The conventions' advised buckets (``gen_ai-metrics``): seconds, and token counts.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
FIRST_CHUNK_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)

_SERIES_KEYS = (n.PROVIDER, n.REQUEST_MODEL, n.RESPONSE_MODEL, n.SERVER_ADDRESS, n.SERVER_PORT)


class Series:
    """One operation's series: the conventions' attributes (``base``), and the mappings
    each recording of it takes, built once (never mutated after: the same object is
    recorded again)."""

    __slots__ = ("_first_chunk", "base", "input", "output")

    def __init__(self, base: n.Attributes) -> None:
        self.base = base
        self.input: n.Attributes = {**base, n.TOKEN_TYPE: "input"}
        self.output: n.Attributes = {**base, n.TOKEN_TYPE: "output"}
        self._first_chunk: dict[tuple[str, str], n.Attributes] = {}

    def first_chunk(self, transport: str, path: str) -> n.Attributes:
        """The first-chunk histogram's attributes: the series, its transport and warmup path."""
        found = self._first_chunk.get((transport, path))
        if found is None:
            found = self._first_chunk[transport, path] = {**self.base, n.TRANSPORT: transport, n.WARMUP_PATH: path}
        return found


class GenAIMetrics:
    """The three histograms on ``meter`` (the same name on the same meter returns the
    instrument already registered, so every agent of a provider shares them), and one
    agent's series."""

    def __init__(self, meter: Meter) -> None:
        self._series: dict[tuple[object, ...], Series] = {}
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

    def series(self, operation: str, attributes: n.Attributes) -> Series:
        """The series of one operation, from its span's attributes (the conventions' keys)."""
        key = (operation, *map(attributes.get, _SERIES_KEYS, _ABSENTS))  # (map: no generator per call)
        found = self._series.get(key)
        if found is None:
            if len(self._series) >= _SERIES_KEPT:  # the server names the response model
                self._series.clear()
            base: n.Attributes = {n.OPERATION: operation}
            for name in _SERIES_KEYS:
                if name in attributes:
                    base[name] = attributes[name]
            found = self._series[key] = Series(base)
        return found

    def operation(self, series: Series, seconds: float, error_type: str | None, context: Context | None = None) -> None:
        attributes = series.base if error_type is None else {**series.base, n.ERROR_TYPE: error_type}
        self.duration.record(seconds, attributes, context=context)

    def usage(self, series: Series, found: n.Attributes, context: Context | None = None) -> None:
        """``gen_ai.client.token.usage`` of a response's usage attributes
        (``n.usage_attributes``: none without a ``usage``); ``context``: whose span an
        exemplar names (the recordings are deferred: ``_deferred``)."""
        value = found.get(n.USAGE_INPUT)
        if isinstance(value, int):
            self.tokens.record(value, series.input, context=context)
        value = found.get(n.USAGE_OUTPUT)
        if isinstance(value, int):
            self.tokens.record(value, series.output, context=context)


_ABSENT = object()  # a series key the span does not have
_ABSENTS = (_ABSENT,) * len(_SERIES_KEYS)  # get()'s default, one per key
_SERIES_KEPT = 64
