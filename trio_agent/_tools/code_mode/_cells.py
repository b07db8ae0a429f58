"""One code-mode cell: a Trio task that steps a JavaScript engine, and its output buffer.

Theory of operation:

* `Cell.run` is the cell's task (started in the agent's nursery by
  `CodeModeHost`). It creates a fresh engine, starts the script and then loops:
  run a slice of promise jobs, move output events into the buffer, start a Trio
  task for every queued host request (nested tool call or timer) in the cell's
  own nursery, and wait for the next completion to settle its promise. Between
  steps it checkpoints. A step is synchronous and can hold the Trio thread for
  up to the per-step CPU time limit.
* The cell ends when the script's main promise settles (`completed` /
  `failed`), when a step hits the CPU time limit (`terminated`), or when its
  cancel scope is cancelled (`terminate()`, `aclose()`, or the agent nursery
  being cancelled: `terminated`). Nested tool tasks and timers that are still
  pending then are cancelled: pending timers and unawaited tool calls do not
  keep a cell alive.
* Output is an ordered event buffer: content items, notifications, yield
  markers and a final `_Ended` marker. `observe()` (one observer at a time:
  an `exec` or `wait` call) reads up to a yield marker, the end marker or its
  deadline, and only then removes what it read, so a cancelled observer loses
  nothing.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Literal

import attrs
import trio

from ._engine import (
    ContentOutput,
    Engine,
    EngineError,
    EngineFactory,
    EngineInterrupted,
    EngineLimits,
    HostRequest,
    NotifyOutput,
    Outcome,
    OutputEvent,
    ToolSpec,
    YieldOutput,
)
from ._pragma import ExecSource

ToolCaller = Callable[[str, object, str], Awaitable[object]]
"""`(tool_name, args, nested_call_id) -> JSON value`: runs one nested tool call.

`args` is a JSON value (a dict for function tools, a str for custom tools).
Raise `ToolCallError(message)` to reject the script's promise with
`new Error(message)`; any other exception is treated as a bug and propagates
(through the cell task into the agent nursery).
"""

Status = Literal["completed", "running", "terminated", "failed"]

_JOBS_PER_SLICE = 64  # promise jobs run between two checkpoints
_MAX_NESTED_CALLS = 128  # concurrent nested tool calls per cell (nanocodex)
_NESTED_YIELD_GRACE = 5.0  # seconds added to a nested shell call's own yield


class ToolCallError(Exception):
    """Raised by a `ToolCaller` to reject the nested call's promise with `Error(message)`."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@attrs.frozen
class _Ended:
    status: Literal["completed", "failed", "terminated"]
    text: str | None = None


@attrs.frozen
class _Completion:
    request_id: int
    ok: bool
    value: object  # the JSON result, or the rejection message when not ok
    tool: str | None = None


@attrs.frozen
class Observation:
    """What one `exec` / `wait` call collected from a cell."""

    status: Status
    content: list[dict[str, object]]
    notifications: tuple[str, ...]


class Cell:
    """A running cell (see module docstring). Created and owned by `CodeModeHost`."""

    def __init__(
        self,
        *,
        cell_id: int,
        call_id: str,
        source: ExecSource,
        call_tool: ToolCaller,
        tools: Sequence[ToolSpec],
        store: dict[str, object],
        limits: EngineLimits,
        engine_factory: EngineFactory,
    ) -> None:
        self.id = cell_id
        self.call_id = call_id
        self.max_output_tokens = source.max_output_tokens
        self.scope = trio.CancelScope()
        self.finished = trio.Event()
        self.detached = False  # an observer returned "running": the cell outlives calls
        self.observing = False
        # True while the script has run as far as it can and waits for the host (a
        # tool call, a timer): the deterministic point where a preempting steer may
        # make an observer return "running" (SPEC sec. 4, interrupting steers).
        self.waiting_on_host = False
        self.extend_until: float | None = None
        self._source = source
        self._call_tool = call_tool
        self._tools = tuple(tools)
        self._tools_by_name = {tool.name: tool for tool in self._tools}
        self._store = store  # shared with the host; a snapshot is taken here
        self._snapshot = dict(store)
        self._limits = limits
        self._engine_factory = engine_factory
        self._events: list[OutputEvent | _Ended] = []
        self._changed = trio.Event()
        self._nested_calls = 0
        self._timers: dict[int, trio.CancelScope] = {}
        self._limiter = trio.CapacityLimiter(_MAX_NESTED_CALLS)

    def terminate(self) -> None:
        """Cancel the cell; it ends with `Script terminated` at its next checkpoint."""
        self.scope.cancel()

    # ---- the cell task -------------------------------------------------------------

    async def run(self) -> None:
        """The cell's task body. Always leaves an end marker in the buffer."""
        ended = _Ended("terminated")
        try:
            with self.scope:
                ended = await self._drive()
        finally:
            self._push(ended)
            self.finished.set()

    async def _drive(self) -> _Ended:
        send, receive = trio.open_memory_channel[_Completion](math.inf)
        with send, receive:
            async with trio.open_nursery() as nursery:
                ended = await self._drive_engine(nursery, send, receive)
                nursery.cancel_scope.cancel()  # discard unawaited tool calls and timers
        return ended

    async def _drive_engine(
        self,
        nursery: trio.Nursery,
        send: trio.MemorySendChannel[_Completion],
        receive: trio.MemoryReceiveChannel[_Completion],
    ) -> _Ended:
        engine: Engine | None = None
        try:
            engine = self._engine_factory(self._limits)
            engine.start(self._source.code, self._tools, self._snapshot)
            outcome = await self._settle(engine, nursery, send)
            while outcome is None:
                self.waiting_on_host = True
                self.wake()
                completion = await receive.receive()
                self.waiting_on_host = False
                self._apply(engine, completion)
                outcome = await self._settle(engine, nursery, send)
        except EngineInterrupted:
            self._salvage(engine)
            limit = self._limits.step_time_limit
            return _Ended(
                "terminated",
                f"Script exceeded the CPU time limit of {limit:g} seconds per step "
                "(runaway loop?) and was terminated.",
            )
        except EngineError as exc:
            self._salvage(engine)
            return _Ended("failed", f"Script error:\n{exc}")
        finally:
            if engine is not None:
                engine.close()
        return self._finish(outcome)

    def _salvage(self, engine: Engine | None) -> None:
        # Keep what the script produced before the failed step (the context is
        # still usable after an interrupt).
        if engine is None:
            return
        try:
            events = engine.take_outputs()
        except EngineError:
            return
        for event in events:
            self._push(event)

    def _finish(self, outcome: Outcome) -> _Ended:
        # store() writes become visible to later cells when the cell completes or
        # fails, not when it is terminated (nanocodex).
        self._store.update(outcome.stored)
        if outcome.status == "failed":
            return _Ended("failed", f"Script error:\n{outcome.error}")
        return _Ended("completed")

    async def _settle(
        self, engine: Engine, nursery: trio.Nursery, send: trio.MemorySendChannel[_Completion]
    ) -> Outcome | None:
        """Run promise jobs until the engine is idle or the script settled."""
        while True:
            await trio.lowlevel.checkpoint()
            more = engine.run_jobs(_JOBS_PER_SLICE)
            for event in engine.take_outputs():
                self._push(event)
            for request in engine.drain_outbox():
                self._dispatch(request, nursery, send)
            outcome = engine.outcome()
            if outcome is not None or not more:
                return outcome

    def _apply(self, engine: Engine, completion: _Completion) -> None:
        if not completion.ok:
            engine.reject(completion.request_id, str(completion.value))
            return
        try:
            engine.resolve(completion.request_id, completion.value)
        except (TypeError, ValueError) as exc:
            engine.reject(
                completion.request_id,
                f"tool {completion.tool} returned a value that is not JSON: {exc}",
            )

    # ---- host requests -------------------------------------------------------------

    def _dispatch(
        self, request: HostRequest, nursery: trio.Nursery, send: trio.MemorySendChannel[_Completion]
    ) -> None:
        if request.op == "tool":
            self._start_tool_call(request, nursery, send)
        elif request.op == "sleep":
            delay = request.args
            if not isinstance(delay, int | float) or not delay >= 0:
                delay = 0
            scope = trio.CancelScope()
            self._timers[request.id] = scope
            nursery.start_soon(self._timer, request.id, min(delay, 2.0**53) / 1000, scope, send)
        elif request.op == "cancel":
            timer = self._timers.pop(request.id, None)
            if timer is not None:
                timer.cancel()
        else:
            raise EngineError(f"unknown code-mode host request {request.op!r}")

    def _start_tool_call(
        self, request: HostRequest, nursery: trio.Nursery, send: trio.MemorySendChannel[_Completion]
    ) -> None:
        args = request.args
        if not isinstance(args, dict) or not isinstance(args.get("name"), str):
            raise EngineError(f"malformed tool request {args!r}")
        name: str = args["name"]
        tool_input = args.get("input")
        error = _argument_error(self._tools_by_name.get(name), tool_input)
        if error is not None:
            send.send_nowait(_Completion(request.id, False, error, name))
            return
        self._nested_calls += 1
        nested_call_id = f"{self.call_id}/code-{self._nested_calls}"
        self._note_nested_yield(name, tool_input)
        nursery.start_soon(
            self._tool_call, request.id, name, tool_input, nested_call_id, send,
            name=f"code-mode {nested_call_id} {name}",
        )

    async def _tool_call(
        self,
        request_id: int,
        name: str,
        tool_input: object,
        nested_call_id: str,
        send: trio.MemorySendChannel[_Completion],
    ) -> None:
        async with self._limiter:
            try:
                value = await self._call_tool(name, tool_input, nested_call_id)
            except ToolCallError as exc:
                send.send_nowait(_Completion(request_id, False, exc.message, name))
                return
        send.send_nowait(_Completion(request_id, True, value, name))

    async def _timer(
        self,
        request_id: int,
        seconds: float,
        scope: trio.CancelScope,
        send: trio.MemorySendChannel[_Completion],
    ) -> None:
        with scope:
            await trio.sleep(seconds)
            send.send_nowait(_Completion(request_id, True, None))
        self._timers.pop(request_id, None)

    def _note_nested_yield(self, name: str, tool_input: object) -> None:
        # A nested shell call may legitimately run for its own yield time; without an
        # explicit pragma yield, `exec` waits for it plus 5 s (nanocodex 5.2).
        yield_ms = _nested_yield_ms(name, tool_input)
        if yield_ms is not None:
            until = trio.current_time() + yield_ms / 1000 + _NESTED_YIELD_GRACE
            self.extend_until = until if self.extend_until is None else max(until, self.extend_until)

    # ---- output buffer -------------------------------------------------------------

    def _push(self, event: OutputEvent | _Ended) -> None:
        self._events.append(event)
        self.wake()

    def wake(self) -> None:
        """Wake the observer so it re-checks its deadline and preemption."""
        self._changed.set()
        self._changed = trio.Event()

    async def observe(
        self,
        deadline: Callable[[], float],
        *,
        terminating: bool = False,
        yield_now: Callable[[], bool] | None = None,
    ) -> Observation:
        """Collect output until a yield, the end of the cell, or `deadline()`.

        `deadline` is re-read after every wake-up, so it may move later. When
        `terminating`, yield markers are skipped and only the end counts. When
        `yield_now()` is true and the script waits for the host, the observation
        ends with "running" (the cell keeps going). Cancel-safe: nothing is
        consumed unless this returns.
        """
        await trio.lowlevel.checkpoint()
        consumed = 0
        while True:
            while consumed < len(self._events):
                event = self._events[consumed]
                consumed += 1
                if isinstance(event, _Ended):
                    return self._take(consumed, event.status)
                if isinstance(event, YieldOutput) and not terminating:
                    return self._take(consumed, "running")
            if not terminating and yield_now is not None and self.waiting_on_host and yield_now():
                return self._take(consumed, "running")
            limit = deadline()
            if trio.current_time() >= limit:
                return self._take(consumed, "running")
            changed = self._changed
            with trio.move_on_at(limit):
                await changed.wait()

    def _take(self, consumed: int, status: Status) -> Observation:
        events = self._events[:consumed]
        del self._events[:consumed]
        content: list[dict[str, object]] = []
        notifications: list[str] = []
        for event in events:
            if isinstance(event, ContentOutput):
                content.append(event.item)
            elif isinstance(event, NotifyOutput):
                notifications.append(event.text)
            elif isinstance(event, _Ended) and event.text is not None:
                content.append({"type": "input_text", "text": event.text})
        return Observation(status, content, tuple(notifications))


def _argument_error(spec: ToolSpec | None, tool_input: object) -> str | None:
    # nanocodex `execute_nested`: function tools take an object, freeform tools a string.
    if spec is None:
        return None
    if spec.is_function and not isinstance(tool_input, dict):
        return f"tools.{spec.js_name} expects an object argument"
    if not spec.is_function and not isinstance(tool_input, str):
        return f"tools.{spec.js_name} is a freeform tool and expects a string argument"
    return None


def _nested_yield_ms(name: str, tool_input: object) -> float | None:
    args: Mapping[str, object] = tool_input if isinstance(tool_input, dict) else {}
    requested = args.get("yield_time_ms")
    if isinstance(requested, bool) or not isinstance(requested, int | float):
        requested = None
    if name == "exec_command":
        return _clamp(requested, 10_000, 250, 30_000)
    if name == "write_stdin":
        if args.get("chars"):
            return _clamp(requested, 250, 250, 30_000)
        return _clamp(requested, 5_000, 5_000, 300_000)
    return None


def _clamp(value: float | None, default: float, low: float, high: float) -> float:
    return min(max(default if value is None else value, low), high)
