"""The ``trio-agent`` command line.

``trio-agent run PROMPT`` talks to the real API when ``OPENAI_API_KEY`` is set, and to
the built-in local scripted model otherwise (or with ``--local``), saying so on its
first line. Human output streams the assistant's text and ends with one summary
line; ``--jsonl`` prints every event as one JSON object per line instead.

``trio-agent serve`` serves durable threads over the Codex app-server v2 protocol
(``docs/app-server.md``): one client on stdio by default, any number with
``--listen ws://127.0.0.1:PORT``. The model is configured as for ``run``; everything
it prints goes to stderr (stdout is the protocol on stdio). SIGINT or SIGTERM shuts it
down cleanly: threads cancelled with their terminal notifications, rollouts flushed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ._replay_cli import add_record_option, add_replay_command, run_replay  # record/replay (issue 15)

if TYPE_CHECKING:
    from ._tracing import Tracing

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trio-agent", description="A Trio-native coding agent runtime.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one prompt and print the answer")
    run.add_argument("prompt", help="what to ask the agent")
    run.add_argument("--local", action="store_true", help="use the built-in local scripted model")
    run.add_argument("--jsonl", action="store_true", help="print every event as a JSON line")
    run.add_argument(
        "--thinking", choices=["minimal", "low", "medium", "high", "xhigh"], default="low",
        help="reasoning effort (default: low)",
    )
    run.add_argument("--workspace", type=Path, default=None, help="where tools run (default: .)")
    run.add_argument("--model", default=None, help="model slug (default: gpt-5.5)")
    run.add_argument(
        "--otel", action="store_true",
        help="export OpenTelemetry spans and metrics over OTLP/HTTP (set OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    add_record_option(run)
    serve = sub.add_parser("serve", help="serve threads over the Codex app-server protocol (JSON-RPC)")
    serve.add_argument("--listen", default=None, metavar="ws://HOST:PORT",
                       help="serve any number of clients over WebSocket (default: one client on stdio)")
    serve.add_argument("--home", type=Path, default=None,
                       help="where rollouts and thread records live (default: $TRIO_AGENT_HOME or ~/.trio-agent)")
    serve.add_argument("--local", action="store_true", help="use the built-in local scripted model")
    serve.add_argument("--unload-delay", type=float, default=60.0, metavar="S",
                       help="seconds an idle thread with no subscriber stays loaded (default: 60)")
    serve.add_argument("--model", default=None, help="default model slug of new threads (default: gpt-5.5)")
    serve.add_argument("--workspace", type=Path, default=None, help="default cwd of new threads (default: .)")
    sub.add_parser(
        "bench", add_help=False,
        help="first-token latency per warmup path against a local scripted server (--help for options)",
    )
    add_replay_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from ._bench import main as bench

        return bench(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "replay":
        return run_replay(args)
    if args.command == "serve":
        from ._serve._command import serve_main

        return serve_main(args)
    try:
        if getattr(args, "otel", False):  # tracing: trio_agent/_tracing/_otlp.py
            from ._tracing._otlp import run_with_otlp

            return run_with_otlp(lambda tracing: trio.run(_run, args, tracing))
        return trio.run(_run, args)
    except KeyboardInterrupt:
        return 130


async def _run(args: argparse.Namespace, tracing: Tracing | None = None) -> int:
    import trio_agent as ta

    key = os.environ.get("OPENAI_API_KEY", "").strip()
    local = args.local or not key
    async with trio.open_nursery() as nursery:
        responses = ta.Responses()
        if local:
            from .testing._local_model import serve_local_model

            reason = "--local given" if args.local else "no OPENAI_API_KEY set"
            print(f"trio-agent: {reason}; using the built-in local scripted model (not a real model)",
                  file=sys.stdout if not args.jsonl else sys.stderr, flush=True)
            server = await nursery.start(serve_local_model)
            responses = ta.Responses(websocket_url=server.url)
        try:
            config = ta.AgentConfig(
                auth=key or "local-key",
                thinking=ta.Thinking(args.thinking),
                workspace=args.workspace or Path.cwd(),
                responses=responses,
                tracing=tracing,
                record=args.record,
                **({"model": args.model} if args.model else {}),
            )
        except ta.ConfigError as exc:
            print(f"trio-agent: {exc}", file=sys.stderr)
            nursery.cancel_scope.cancel()
            return 2
        code = await _run_prompt(config, args)
        nursery.cancel_scope.cancel()
    return code


async def _run_prompt(config: Any, args: argparse.Namespace) -> int:
    import trio_agent as ta

    printer = _JsonlPrinter() if args.jsonl else _HumanPrinter()
    async with trio.open_nursery() as nursery:
        async with ta.open_agent(config) as agent:
            nursery.start_soon(printer.consume, agent.events)
            turn = await agent.prompt(args.prompt)
            try:
                await turn.result()
                code = 0
            except ta.AgentError as exc:
                print(f"\ntrio-agent: the turn failed: {exc}", file=sys.stderr)
                code = 1
    return code


class _JsonlPrinter:
    async def consume(self, events: Any) -> None:
        async for event in events:
            try:
                sys.stdout.write(event.to_json_line())
                sys.stdout.flush()
            except BrokenPipeError:  # e.g. piped into `head`: stop printing, keep the run clean
                sys.stdout = open(os.devnull, "w")  # noqa: ASYNC230 - one-off, never blocks


class _HumanPrinter:
    def __init__(self) -> None:
        self.first_token: float | None = None
        self.started: float | None = None
        self.streamed = False

    async def consume(self, events: Any) -> None:
        async for event in events:
            self.on_event(event)

    def on_event(self, event: Any) -> None:
        kind, payload = event.kind.value, event.payload
        if kind == "run.started":
            self.started = event.time
        elif kind == "assistant.delta":
            if self.first_token is None:
                self.first_token = event.time
            sys.stdout.write(payload["text"])
            sys.stdout.flush()
            self.streamed = True
        elif kind == "assistant.message":
            if self.streamed:
                sys.stdout.write("\n")
            self.streamed = False
        elif kind == "tool.call":
            print(f"[tool] {payload['tool']} {_short(payload['arguments'])}", flush=True)
        elif kind == "tool.result":
            print(f"[tool] {payload['tool']} -> {payload['status']}: {_short(payload['result'])}", flush=True)
        elif kind in ("run.completed", "run.failed"):
            self.summary(event)

    def summary(self, event: Any) -> None:
        payload = event.payload
        ttft = "n/a" if self.first_token is None or self.started is None else (
            f"{(self.first_token - self.started) * 1000:.1f} ms"
        )
        print(
            f"-- {payload['status']}: {payload['model_calls']} model call(s), "
            f"{payload['usage']['total_tokens']} tokens, first token {ttft}, "
            f"total {payload['duration_ns'] / 1e6:.1f} ms",
            flush=True,
        )


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."
