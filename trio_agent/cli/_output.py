"""What ``trio-agent run`` prints: the human view of the event stream, or JSON Lines.

Which stream carries what (as ``codex exec`` does it): standard output carries only
the result -- in human mode the turn's final answer, in JSONL mode the events -- so
``trio-agent run PROMPT > answer.txt`` or ``ANSWER=$(trio-agent run PROMPT)`` captures
exactly the answer; everything else is progress and goes to standard error.

Human mode, on stderr: the assistant's text as it streams; ``[tool] NAME ARGS`` when a
tool starts; a running command's output line by line as it arrives (``tool.progress``
events with ``stream: "output"``), indented ``  | ``, made safe for a terminal
(escape sequences and control characters dropped; after a carriage return only what
follows it, as a terminal would show) and cut to the terminal's width (200 columns
when stderr is not a terminal); ``[tool] NAME -> STATUS in 1.2 s: RESULT`` when it
ends; ``  ... NAME still running (20 s)`` for a tool that printed nothing for 10 s
(:meth:`HumanPrinter.tick`, driven once a second by :meth:`HumanPrinter.ticker`;
tests call ``tick(now)`` with the events' times); one ``retrying in 0.4 s: connection
lost (attempt 2/5)`` line per retry; MCP servers coming up or failing; and one
``-- completed: ...`` summary per turn. Every time shown is taken from the events
(Trio's clock), so the output depends on the event stream alone.

Human mode, on stdout: once the turn completed, its final message
(``TurnResult.final_message``, :meth:`HumanPrinter.answer`) -- also when the server
sent it only inside ``response.completed`` (no deltas, no ``output_item.done``, so no
``assistant.*`` event showed it). When stdout and stderr are both terminals the
streamed text already showed it, so it is printed again only if nothing did.

JSONL mode: every event as one JSON line on stdout and nothing else there.

In both modes notes go to stderr (the sandbox fallback, as one line instead of a
``RuntimeWarning``), and after Ctrl-C the command prints one ``-- cancelled ...`` line
there (:meth:`_Tracker.cancelled_line`) in place of the cancelled turn's summary.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import AsyncIterable, Iterator
from typing import Any, TextIO

import trio

from ._signals import Interrupts

__all__ = ["HumanPrinter", "JsonlPrinter"]

#: A tool that printed nothing for this long gets a "still running" line.
QUIET_AFTER = 10.0
#: Longest output line shown when stderr is not a terminal (then: its width).
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


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


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

    def __init__(self, interrupts: Interrupts, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.interrupts = interrupts
        self._out = out
        self._err = err
        self.terminal: dict[str, Any] | None = None  # the last turn's run.completed/failed payload
        self.stopped: list[tuple[str, str]] = []  # (call id, tool) of calls cancelled with the turn
        self.ended = trio.Event()  # the printer handled the (one) turn's terminal event

    @property
    def err(self) -> TextIO:
        return self._err or sys.stderr

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    def write_out(self, text: str) -> None:
        """``text`` on stdout, the result's stream; once its reader went away (piped into
        ``head``) nothing more is printed there, and the run stays clean."""
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            devnull = open(os.devnull, "w")  # it replaces stdout for the rest of the process
            if self._out is None:
                sys.stdout = devnull  # also for the interpreter's last flush at exit
            else:
                self._out = devnull

    def track(self, event: Any) -> None:
        kind, payload = event.kind.value, event.payload
        if kind == "run.started":
            self.terminal, self.stopped = None, []
        elif kind in ("run.completed", "run.failed"):
            self.terminal = payload
            self.ended.set()
        elif kind == "tool.result" and payload.get("status") == "cancelled":
            self.stopped.append((payload["call_id"], payload["tool"]))
        elif kind == "sandbox.unavailable":
            self.err.write(f"trio-agent: {payload['reason']}\n")
            self.err.flush()

    def attached(self) -> None:
        """Standard output changed under the printer (a warm daemon's worker took a client)."""

    async def answer(self, final_message: str) -> None:
        """The completed turn's final message (JSONL mode: already in the events)."""

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

    async def consume(self, events: AsyncIterable[Any]) -> None:
        async for event in events:
            self.track(event)
            self.write_out(event.to_json_line())


class HumanPrinter(_Tracker):
    """The human view (see the module docstring): progress on ``err`` (default:
    stderr), the answer on ``out`` (default: stdout)."""

    def __init__(self, interrupts: Interrupts, out: TextIO | None = None, err: TextIO | None = None,
                 *, width: int | None = None) -> None:
        super().__init__(interrupts, out, err)
        self._fixed_width = width is not None
        self.width = width if width is not None else _width(self.err)
        self.running: dict[str, _Running] = {}
        self.first_token: float | None = None
        self.started: float | None = None
        self.streamed = False  # the assistant's text is mid-line
        self.streaming = ""  # the text of the message streaming now
        self.rendered: list[str] = []  # the assistant messages shown (whole) this turn
        self._held: list[str] | None = None  # progress kept back while a question is on stderr

    def attached(self) -> None:
        if not self._fixed_width:
            self.width = _width(self.err)

    async def consume(self, events: AsyncIterable[Any]) -> None:
        """Print ``events`` until they end, with the "still running" ticker beside."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.ticker)
            async for event in events:
                self.on_event(event)
            nursery.cancel_scope.cancel()

    async def answer(self, final_message: str) -> None:
        """Once the turn's events are shown: :meth:`print_answer`."""
        await self.ended.wait()
        self.print_answer(final_message)

    def print_answer(self, final_message: str) -> None:
        """The final message on stdout -- unless stdout and stderr are both terminals
        and the streamed text already showed it (see the module docstring)."""
        text = final_message.strip("\n")
        if not text.strip():
            return
        if _is_terminal(self.out) and _is_terminal(self.err) and text.strip() in {
            shown.strip() for shown in self.rendered
        }:
            return
        self.write_out(text + "\n")

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

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Keep progress back while the block asks the user a question on stderr (an
        approval), so no line lands inside it; what was kept is printed after."""
        self._held = []
        try:
            yield
        finally:
            kept, self._held = self._held, None
            self._write_err("".join(kept))

    def _write_err(self, text: str) -> None:
        if self._held is not None:
            self._held.append(text)
        elif text:
            self.err.write(text)
            self.err.flush()

    def _line(self, text: str) -> None:
        self._end_text()
        self._write_err(text + "\n")

    def _end_text(self) -> None:
        """End the streamed text's line (it was shown: remember it)."""
        if self.streamed:
            self._write_err("\n")
            self.rendered.append(self.streaming)
            self.streamed, self.streaming = False, ""

    def _run_started(self, event: Any, payload: dict[str, Any]) -> None:
        self.started, self.first_token, self.rendered = event.time, None, []

    def _delta(self, event: Any, payload: dict[str, Any]) -> None:
        if self.first_token is None:
            self.first_token = event.time
        self._write_err(payload["text"])
        self.streamed = True
        self.streaming += payload["text"]

    def _message(self, event: Any, payload: dict[str, Any]) -> None:
        text = payload.get("text") or ""
        if self.streamed:
            self._end_text()
        elif text and event.turn_id is not None:
            self._write_err(text + "\n")  # it came whole, without deltas
            self.rendered.append(text)

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

    def _warning(self, event: Any, payload: dict[str, Any]) -> None:
        if payload.get("code") in _SHOWN_WARNINGS:  # what changes how the agent talks to the server
            self._line(f"note: {payload['message']}")

    def _mcp_ready(self, event: Any, payload: dict[str, Any]) -> None:
        self._line(f"[mcp] {payload['server']} ready: {len(payload['tools'])} tool(s)")

    def _mcp_failed(self, event: Any, payload: dict[str, Any]) -> None:
        self._line(f"[mcp] {payload['server']} failed: {_short(payload['error'])}")

    def _mcp_restarting(self, event: Any, payload: dict[str, Any]) -> None:
        self._line(f"[mcp] {payload['server']} lost its connection, restarting "
                   f"({payload['attempt']}/{payload['max_attempts']}): {_short(payload['reason'])}")

    def _summary(self, event: Any, payload: dict[str, Any]) -> None:
        self._end_text()  # deltas with no assistant.message after them
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


_SHOWN_WARNINGS = ("transport_fallback", "request_fields_dropped")
_HANDLERS = {
    "run.started": HumanPrinter._run_started,
    "assistant.delta": HumanPrinter._delta,
    "assistant.message": HumanPrinter._message,
    "tool.call": HumanPrinter._tool_call,
    "tool.progress": HumanPrinter._progress,
    "tool.result": HumanPrinter._tool_result,
    "model.attempt.retrying": HumanPrinter._retrying,
    "api.warning": HumanPrinter._warning,
    "mcp.server.ready": HumanPrinter._mcp_ready,
    "mcp.server.failed": HumanPrinter._mcp_failed,
    "mcp.server.restarting": HumanPrinter._mcp_restarting,
    "run.completed": HumanPrinter._summary,
    "run.failed": HumanPrinter._summary,
}
