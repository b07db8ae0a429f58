"""An agent's metric series: each recording's attributes built once per series, and a
bounded number of series kept (the server names the response model)."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from trio_agent._tracing import _names as n
from trio_agent._tracing._metrics import GenAIMetrics

_SPAN: n.Attributes = {n.PROVIDER: "openai", n.REQUEST_MODEL: "gpt-5.5", n.SERVER_ADDRESS: "example.test",
                       n.SERVER_PORT: 443, n.CONVERSATION_ID: "not-a-series-key"}


def test_a_series_is_built_once_and_records_the_conventions_attributes() -> None:
    reader = InMemoryMetricReader()
    metrics = GenAIMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    first = metrics.series("chat", {**_SPAN, n.RESPONSE_MODEL: "gpt-5.5-0701"})
    again = metrics.series("chat", {**_SPAN, n.RESPONSE_MODEL: "gpt-5.5-0701", n.RESPONSE_ID: "resp-2"})
    assert again is first
    assert first.base == {n.OPERATION: "chat", n.PROVIDER: "openai", n.REQUEST_MODEL: "gpt-5.5",
                          n.RESPONSE_MODEL: "gpt-5.5-0701", n.SERVER_ADDRESS: "example.test", n.SERVER_PORT: 443}
    assert metrics.series("chat", _SPAN) is not first  # no response model: another series
    assert metrics.series("compact", {**_SPAN, n.RESPONSE_MODEL: "gpt-5.5-0701"}) is not first
    for tokens in (10, 20):
        metrics.usage(first, {n.USAGE_INPUT: tokens, n.USAGE_OUTPUT: 2})
    metrics.operation(first, 0.5, None)
    metrics.operation(first, 0.5, "timeout")
    data = reader.get_metrics_data()
    assert data is not None
    points = {(metric.name, tuple(sorted((point.attributes or {}).items()))): point.count  # type: ignore[union-attr]
              for rm in data.resource_metrics for sm in rm.scope_metrics
              for metric in sm.metrics for point in metric.data.data_points}
    key = tuple(sorted(first.base.items()))
    assert points == {
        (n.TOKEN_USAGE_METRIC, tuple(sorted({**first.base, n.TOKEN_TYPE: "input"}.items()))): 2,
        (n.TOKEN_USAGE_METRIC, tuple(sorted({**first.base, n.TOKEN_TYPE: "output"}.items()))): 2,
        (n.DURATION_METRIC, key): 1,
        (n.DURATION_METRIC, tuple(sorted({**first.base, n.ERROR_TYPE: "timeout"}.items()))): 1,
    }


def test_a_server_naming_a_new_model_per_response_does_not_grow_the_series_kept() -> None:
    metrics = GenAIMetrics(MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("test"))
    for i in range(1000):
        series = metrics.series("chat", {**_SPAN, n.RESPONSE_MODEL: f"model-{i}"})
        assert series.base[n.RESPONSE_MODEL] == f"model-{i}"
    assert len(metrics._series) <= 64
