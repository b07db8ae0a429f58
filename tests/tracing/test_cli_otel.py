"""``trio-agent run --otel``: a real OTLP/HTTP export, received by a tiny collector on
loopback (the CLI runs as a subprocess against its built-in local model)."""

from __future__ import annotations

import functools
import gzip
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import h11
import trio
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .._os_facts import wait_for_os_fact

REPO = Path(__file__).resolve().parents[2]


class Collector:
    """Accepts OTLP/HTTP posts on 127.0.0.1 and keeps ``(path, body)`` of each."""

    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        target, body, gzipped = "", b"", False
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Request):
                target, body = event.target.decode(), b""
                gzipped = (b"content-encoding", b"gzip") in [(k.lower(), v) for k, v in event.headers]
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                self.received.append((target, gzip.decompress(body) if gzipped else body))
                headers = [("content-type", "application/x-protobuf"), ("content-length", "0")]
                await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)) or b"")
                await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
                conn.start_next_cycle()
            else:  # the client closed the connection
                return

    def spans(self) -> list[tuple[str, dict[str, Any]]]:
        found: list[tuple[str, dict[str, Any]]] = []
        for path, body in self.received:
            if path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
                    found.extend((span.name, {"service": service, **_status(span)})
                                 for scope in resource.scope_spans for span in scope.spans)
        return found

    def metric_names(self) -> set[str]:
        names: set[str] = set()
        for path, body in self.received:
            if path == "/v1/metrics":
                for resource in ExportMetricsServiceRequest.FromString(body).resource_metrics:
                    names.update(m.name for scope in resource.scope_metrics for m in scope.metrics)
        return names


def _status(span: Any) -> dict[str, str]:
    """``status``: the error description of a failed span (nothing for the others)."""
    return {"status": span.status.message} if span.status.code == 2 else {}


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "OPENAI_API_KEY"}
    env.update(PYTHONPATH=str(REPO), **extra)
    return env


async def test_run_otel_exports_spans_and_the_first_token_metric_over_otlp(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    collector = Collector()
    port = await nursery.start(collector.serve)
    env = cli_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_SERVICE_NAME="agent-under-test")
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, "-m", "trio_agent", "run", "--local", "--otel", "--workspace", str(tmp_path), "hello"],
            cwd=REPO, env=env, capture_stdout=True, capture_stderr=True, check=False,
        )
    assert result.returncode == 0, result.stderr.decode()
    spans = collector.spans()
    names = sorted(name for name, _ in spans)
    assert {"agent /root", "invoke_agent /root", "chat gpt-5.5"} <= set(names), names
    # The prompt in hand: no warmup (open_agent(warmup=False)); its socket opened at
    # startup, outside any call, as the generic profile's does: no websocket.connect span.
    assert "warmup gpt-5.5" not in names and "websocket.connect" not in names, names
    assert {attributes["service"] for _, attributes in spans} == {"agent-under-test"}
    assert "gen_ai.client.operation.time_to_first_chunk" in collector.metric_names()


async def test_run_otel_without_an_endpoint_says_which_variable_to_set(tmp_path: Path) -> None:
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, "-m", "trio_agent", "run", "--local", "--otel", "--workspace", str(tmp_path), "hello"],
            cwd=REPO, env=cli_env(), capture_stdout=True, capture_stderr=True, check=False,
        )
    assert result.returncode == 2
    assert "set OTEL_EXPORTER_OTLP_ENDPOINT" in result.stderr.decode()
    assert result.stdout == b""  # nothing ran



async def test_ctrl_c_still_flushes_the_spans_of_the_cancelled_run(nursery: trio.Nursery, tmp_path: Path) -> None:
    collector = Collector()
    port = await nursery.start(collector.serve)
    command = [sys.executable, "-m", "trio_agent", "run", "--local", "--otel", "--workspace", str(tmp_path),
               "run: touch started && sleep 30"]
    run = functools.partial(
        trio.run_process, command, cwd=REPO, env=cli_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}"),
        check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    with trio.fail_after(60):
        async with trio.open_nursery() as inner:
            process = await inner.start(run)
            await wait_for_os_fact((tmp_path / "started").exists, "the tool starting (the turn is live)")
            process.send_signal(signal.SIGINT)
    assert process.returncode != 0  # interrupted (the exit status itself is the CLI's business)
    turns = [attributes for name, attributes in collector.spans() if name == "invoke_agent /root"]
    assert turns == [{"service": "trio-agent", "status": "cancelled"}]
    assert ("execute_tool exec_command", {"service": "trio-agent", "status": "cancelled"}) in collector.spans()
