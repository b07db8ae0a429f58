"""``trio-agent run --otel`` with no collector listening (issue 24), driving the installed
console script: no SDK retry lines, one warning naming the collector and what was
dropped, and an exit that does not wait out the SDK's retries (the bound below is only
a hang guard; the exporters' settings are asserted instead of a time). A collector that
accepts connections and never answers (issue 29) holds the exit for at most the
shutdown bound, whatever the exporters' own timeouts."""

from __future__ import annotations

import socket
from pathlib import Path

import trio

from ..tracing.test_cli_otel import Collector
from ._cli import SCRIPT, cli_env, progress, run_cli

ANSWER = ("Hello from trio_agent's local scripted model. You said: 'hi'. Set OPENAI_API_KEY to talk to a "
          "real model, or try `run: ls` to see the exec tool.")
SDK_NOISE = ("Transient error", "retrying", "Failed to export", "Traceback", "Exporter already shutdown")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: connecting is refused


async def test_otel_without_a_collector_is_one_warning_and_no_retry_lines(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    result = await run_cli("run", "--otel", "hi", cwd=tmp_path, env=cli_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint),
                           command=SCRIPT, seconds=60)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert result.stdout.decode() == ANSWER + "\n"
    assert not [line for line in err.splitlines() if any(noise in line for noise in SDK_NOISE)], err
    lines = progress(err)
    assert lines[-2].startswith("-- completed: 1 model call(s), ")
    assert lines[-1] == (f"trio-agent: the OpenTelemetry collector at {endpoint} was unreachable or refused the "
                         "export; this run's spans and metrics were dropped")
    assert len(lines) == 4  # the local model's notice, the streamed answer, the summary, the warning


async def test_otel_with_a_collector_exports_and_warns_of_nothing(nursery: trio.Nursery, tmp_path: Path) -> None:
    collector = Collector()
    port = await nursery.start(collector.serve)
    env = cli_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    result = await run_cli("run", "--otel", "hi", cwd=tmp_path, env=env, command=SCRIPT, seconds=60)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert progress(err)[-1].startswith("-- completed: ")  # no warning after it
    assert "invoke_agent /root" in [name for name, _ in collector.spans()]
    assert "gen_ai.client.operation.time_to_first_chunk" in collector.metric_names()


def test_each_export_is_one_attempt_unless_the_user_set_a_timeout() -> None:
    from trio_agent._tracing._otlp import EXPORT_TIMEOUT, export_timeout

    # The SDK retries after 1 s +- 20 % jitter only while its deadline allows: below 0.8 s, never.
    assert EXPORT_TIMEOUT < 0.8
    assert export_timeout({}, "traces") == export_timeout({}, "metrics") == EXPORT_TIMEOUT
    assert export_timeout({"OTEL_EXPORTER_OTLP_TIMEOUT": "30"}, "traces") is None  # the SDK reads it
    assert export_timeout({"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "5"}, "metrics") is None
    assert export_timeout({"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "5"}, "traces") == EXPORT_TIMEOUT


class SilentCollector:
    """Accepts TCP connections on 127.0.0.1 and never reads or answers (a hung collector)."""

    def __init__(self) -> None:
        self.connections: list[trio.SocketStream] = []

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._hold, listeners)

    async def _hold(self, stream: trio.SocketStream) -> None:
        self.connections.append(stream)
        await trio.sleep_forever()


async def test_a_silent_collector_holds_the_exit_for_at_most_the_shutdown_bound(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    collector = SilentCollector()
    port = await nursery.start(collector.serve)
    endpoint = f"http://127.0.0.1:{port}"
    # The user's exporter timeout is 60 s: without the bound, the final flush waits it
    # out for traces and again for metrics; the hang guard (30 s) is far below that,
    # and far above the 0.5 s bound plus start-up.
    env = cli_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="60",
                  OTEL_BSP_EXPORT_TIMEOUT="500")
    result = await run_cli("run", "--otel", "hi", cwd=tmp_path, env=env, command=SCRIPT, seconds=30)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert result.stdout.decode() == ANSWER + "\n"
    assert collector.connections  # the exporter did reach it
    assert progress(err)[-1] == (
        f"trio-agent: the OpenTelemetry collector at {endpoint} did not take this run's telemetry within 0.5 s "
        "at exit (OTEL_BSP_EXPORT_TIMEOUT, milliseconds); what was not exported was dropped"
    )
    assert not [line for line in err.splitlines() if any(noise in line for noise in SDK_NOISE)], err


def test_the_shutdown_bound_is_2_s_unless_otel_bsp_export_timeout_says_otherwise() -> None:
    from trio_agent._tracing._otlp import SHUTDOWN_TIMEOUT, shutdown_timeout

    assert SHUTDOWN_TIMEOUT == 2.0 and shutdown_timeout({}) == 2.0
    assert shutdown_timeout({"OTEL_BSP_EXPORT_TIMEOUT": "500"}) == 0.5  # milliseconds, as the spec says
    assert shutdown_timeout({"OTEL_BSP_EXPORT_TIMEOUT": " 0 "}) == 0.0
    for bad in ("soon", "-1", "inf", "nan", ""):
        assert shutdown_timeout({"OTEL_BSP_EXPORT_TIMEOUT": bad}) == SHUTDOWN_TIMEOUT
