"""What ``trio-agent run`` prints: the human view of the event stream, or JSON Lines.

Human mode, on stdout: the assistant's text as it streams; ``[tool] NAME ARGS`` when a
tool starts; a running command's output line by line as it arrives (``tool.progress``
events with ``stream: "output"``), indented ``  | ``, made safe for a terminal
(escape sequences and control characters dropped; after a carriage return only what
follows it, as a terminal would show) and cut to the terminal's width (200 columns
when stdout is not a terminal); ``[tool] NAME -> STATUS in 1.2 s: RESULT`` when it
ends; ``  ... NAME still running (20 s)`` for a tool that printed nothing for 10 s
(:meth:`HumanPrinter.tick`, driven once a second by :meth:`HumanPrinter.ticker`;
tests call ``tick(now)`` with the events' times); one ``retrying in 0.4 s: connection
lost (attempt 2/5)`` line per retry; MCP servers coming up or failing; and one
``-- completed: ...`` summary per turn. Every time shown is taken from the events
(Trio's clock), so the output depends on the event stream alone.

JSONL mode: every event as one JSON line on stdout and nothing else there.

In both modes notes go to stderr (the sandbox fallback, as one line instead of a
``RuntimeWarning``), and after Ctrl-C the command prints one ``-- cancelled ...`` line
(:meth:`_Tracker.cancelled_line`) in place of the cancelled turn's summary.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import AsyncIterable
from typing import Any, TextIO

import trio

from ._cli_signals import Interrupts

__all__ = ["HumanPrinter", "JsonlPrinter"]

#: A tool that printed nothing for this long gets a "still running" line.
QUIET_AFTER = 10.0
#: Longest output line shown when stdout is not a terminal (then: its width).
DEFAULT_WIDTH = 200
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_PARTIAL_LIMIT = 64 * 1024  # a "line" without a newline is shown once it gets this long


def _width(stream: TextIO) -> int:
    try:
        if stream.isatty():
            return max(20, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    except (AttributeError, ValueError, OSError):
        pass
    return DEFAULT_WIDTH


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else repr(value)
    return _cut(text.replace("\n", "\\n"), limit)


def terminal_safe(line: str) -> str:
    """``line`` as a terminal would show it, with nothing that could drive the terminal."""
    line = line.removesuffix("\r").rsplit("\r", 1)[-1]
    return _CONTROLS.sub("", _ESCAPES.sub("", line)).expandtabs(8)


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"


def retry_reason(payload: dict[str, Any]) -> str:
    """A few words for why a model call attempt failed (``error_class``), else its error."""
    cls = str(payload.get("error_class", ""))
    if cls in ("premature_close", "receive_transport", "send_transport"):
        return "connection lost"
    if cls == "event_idle_timeout":
        return "the server went silent"
    if cls.endswith("_rate_limit"):
        return "rate limited"
    if cls.endswith("_server"):
        return "server error"
    if "timeout" in cls:
        return "timed out"
    if "connect" in cls or cls.startswith("handshake"):
        return "cannot connect"
    error = str(payload.get("error") or cls or "failed")
    return _cut(error.splitlines()[0] if error.strip() else error, 100)


class _Running:
    __slots__ = ("partial", "shown", "started", "tool")

    def __init__(self, tool: str, started: float, shown: float) -> None:
        self.tool = tool
        self.started = started
        self.shown = shown  # when a line about it was last printed
        self.partial = ""  # output after its last newline


class _Tracker:
    """What both printers remember for the summary and the ``-- cancelled`` line."""

    def __init__(self, interrupts: Interrupts, err: TextIO | None) -> None:
        self.interrupts = interrupts
        self._err = err
        self.terminal: dict[str, Any] | None = None  # the last turn's run.completed/failed payload
        self.stopped: list[tuple[str, str]] = []  # (call id, tool) of calls cancelled with the turn

    @property
    def err(self) -> TextIO:
        return self._err or sys.stderr

    def track(self, event: Any) -> None:
        kind, payload = event.kind.value, event.payload
        if kind == "run.started":
            self.terminal, self.stopped = None, []
        elif kind in ("run.completed", "run.failed"):
            self.terminal = payload
        elif kind == "tool.result" and payload.get("status") == "cancelled":
            self.stopped.append((payload["call_id"], payload["tool"]))
        elif kind == "sandbox.unavailable":
            self.err.write(f"trio-agent: {payload['reason']}\n")
            self.err.flush()

    def attached(self) -> None:
        """Standard output changed under the printer (a warm daemon's worker took a client)."""

    def cancelled_line(self, starting_since: float) -> str:
        """The one line after Ctrl-C: what was cancelled, and after how long."""
        how = f"-- cancelled by {self.interrupts.name}"
        at = self.interrupts.at if self.interrupts.at is not None else starting_since
        terminal = self.terminal
        if terminal is None:
            return f"{how} before the turn started, after {_seconds(max(0.0, at - starting_since))}"
        if terminal["status"] != "cancelled":
            return f"{how} while the agent closed, after the turn {terminal['status']}"
        calls = [call for call, _ in self.stopped]
        leaves = [tool for call, tool in self.stopped if not any(c.startswith(call + "/") for c in calls)]
        stopped = f"; stopped {', '.join(dict.fromkeys(leaves))}" if leaves else ""
        return (f"{how} after {_seconds(terminal['duration_ns'] / 1e9)}: the turn, "
                f"{terminal['model_calls']} model call(s), {terminal['usage']['total_tokens']} tokens{stopped}")


class JsonlPrinter(_Tracker):
    """Every event as one JSON line on ``out`` (default: stdout)."""

    def __init__(self, interrupts: Interrupts, out: TextIO | None = None, err: TextIO | None = None) -> None:
        super().__init__(interrupts, err)
        self._out = out

    async def consume(self, events: AsyncIterable[Any]) -> None:
        async for event in events:
            self.track(event)
            out = self._out or sys.stdout
            try:
                out.write(event.to_json_line())
                out.flush()
            except BrokenPipeError:  # e.g. piped into `head`: stop printing, keep the run clean
                devnull = open(os.devnull, "w")  # noqa: ASYNC230 - one-off, never blocks
                if self._out is None:
                    sys.stdout = devnull  # also for the interpreter's last flush at exit
                else:
                    self._out = devnull


class HumanPrinter(_Tracker):
    """The human view (see the module docstring)."""

    def __init__(self, interrupts: Interrupts, out: TextIO | None = None, err: TextIO | None = None,
                 *, width: int | None = None) -> None:
        super().__init__(interrupts, err)
        self._out = out
        self._fixed_width = width is not None
        self.width = width if width is not None else _width(out or sys.stdout)
        self.running: dict[str, _Running] = {}
        self.first_token: float | None = None
        self.started: float | None = None
        self.streamed = False  # the assistant's text is mid-line

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    def attached(self) -> None:
        if not self._fixed_width:
            self.width = _width(self.out)

    async def consume(self, events: AsyncIterable[Any]) -> None:
        """Print ``events`` until they end, with the "still running" ticker beside."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.ticker)
            async for event in events:
                self.on_event(event)
            nursery.cancel_scope.cancel()

    async def ticker(self, every: float = 1.0) -> None:
        """Call :meth:`tick` every ``every`` seconds until cancelled."""
        while True:
            await trio.sleep(every)
            self.tick(trio.current_time())

    def tick(self, now: float) -> None:
        """A "still running" line for each innermost running tool quiet for ``QUIET_AFTER``."""
        for call_id, running in self.running.items():
            inner = any(other.startswith(call_id + "/") for other in self.running)
            if not inner and now - running.shown >= QUIET_AFTER:
                self._line(f"  ... {running.tool} still running ({now - running.started:.0f} s)")
                running.shown = now

    def on_event(self, event: Any) -> None:
        self.track(event)
        handler = _HANDLERS.get(event.kind.value)
        if handler is not None:
            handler(self, event, event.payload)

    def _line(self, text: str) -> None:
        if self.streamed:
            self.out.write("\n")
            self.streamed = False
        self.out.write(text + "\n")
        self.out.flush()

    def _run_started(self, event: Any, payload: dict[str, Any]) -> None:
        self.started, self.first_token = event.time, None

    def _delta(self, event: Any, payload: dict[str, Any]) -> None:
        if self.first_token is None:
            self.first_token = event.time
        self.out.write(payload["text"])
        self.out.flush()
        self.streamed = True

    def _message(self, event: Any, payload: dict[str, Any]) -> None:
        if not self.streamed and payload.get("text") and event.turn_id is not None:
            self.out.write(payload["text"])  # it came whole, without deltas
        self.out.write("\n" if self.streamed or payload.get("text") else "")
        self.out.flush()
        self.streamed = False

    def _tool_call(self, event: Any, payload: dict[str, Any]) -> None:
        self.running[payload["call_id"]] = _Running(payload["tool"], event.time, event.time)
        self._line(f"[tool] {payload['tool']} {_short(payload['arguments'])}")

    def _progress(self, event: Any, payload: dict[str, Any]) -> None:
        running = self.running.get(payload["call_id"])
        if payload.get("stream") != "output" or running is None:
            self._line(f"[tool] {payload['tool']}: {_short(payload['message'])}")
            return
        *lines, running.partial = (running.partial + payload["message"]).split("\n")
        if len(running.partial) > _PARTIAL_LIMIT:
            lines.append(running.partial)
            running.partial = ""
        for line in lines:
            self._line(_cut("  | " + terminal_safe(line), self.width))
        if lines:
            running.shown = event.time

    def _tool_result(self, event: Any, payload: dict[str, Any]) -> None:
        running = self.running.pop(payload["call_id"], None)
        if running is not None and running.partial:
            self._line(_cut("  | " + terminal_safe(running.partial), self.width))
        took = _seconds(payload["duration_ns"] / 1e9)
        self._line(f"[tool] {payload['tool']} -> {payload['status']} in {took}: {_short(payload['result'])}")

    def _retrying(self, event: Any, payload: dict[str, Any]) -> None:
        self._line(f"retrying in {_seconds(payload['delay_ns'] / 1e9)}: {retry_reason(payload)} "
                   f"(attempt {payload['next_attempt']}/{payload['max_attempts']})")

    def _mcp_ready(self, event: Any, payload: dict[str, Any]) -> None:
        self._line(f"[mcp] {payload['server']} ready: {len(payload['tools'])} tool(s)")

    def _mcp_failed(self, event: Any, payload: dict[str, Any]) -> None:
        self._line(f"[mcp] {payload['server']} failed: {_short(payload['error'])}")

    def _summary(self, event: Any, payload: dict[str, Any]) -> None:
        if self.interrupts.received and payload["status"] == "cancelled":
            return  # the command prints the one "-- cancelled" line instead
        ttft = "n/a" if self.first_token is None or self.started is None else (
            f"{(self.first_token - self.started) * 1000:.1f} ms"
        )
        self._line(
            f"-- {payload['status']}: {payload['model_calls']} model call(s), "
            f"{payload['usage']['total_tokens']} tokens, first token {ttft}, "
            f"total {payload['duration_ns'] / 1e6:.1f} ms"
        )


_HANDLERS = {
    "run.started": HumanPrinter._run_started,
    "assistant.delta": HumanPrinter._delta,
    "assistant.message": HumanPrinter._message,
    "tool.call": HumanPrinter._tool_call,
    "tool.progress": HumanPrinter._progress,
    "tool.result": HumanPrinter._tool_result,
    "model.attempt.retrying": HumanPrinter._retrying,
    "mcp.server.ready": HumanPrinter._mcp_ready,
    "mcp.server.failed": HumanPrinter._mcp_failed,
    "run.completed": HumanPrinter._summary,
    "run.failed": HumanPrinter._summary,
}
