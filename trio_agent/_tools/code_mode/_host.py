"""`CodeModeHost`: the `exec` / `wait` tools of one agent (SPEC sec. 7, nanocodex 5.2).

Theory of operation: `exec` parses the pragma, allocates a cell id (per host,
from 1, never reused), starts the cell as a task in the agent's nursery and
observes it until the script completes, calls `yield_control()`, or the yield
deadline passes. In the last two cases the cell stays registered and keeps
running in the background; `wait` observes it again and returns what it
produced since, or its final output. A registered cell is forgotten once its
final output has been returned.

Timeouts use Trio's clock only (`MockClock` controls them). Yield windows of
10 s or more get 1 s of grace (so the default 10 s yield returns after 11 s,
as in nanocodex). Without a pragma `yield_time_ms`, a nested `exec_command` /
`write_stdin` call extends `exec`'s deadline to its own yield time + 5 s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import attrs
import trio

from ._cells import Cell, Status, ToolCaller
from ._engine import EngineFactory, EngineLimits, ToolSpec, quickjs_engine
from ._output import (
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_TERMINATED,
    format_cell_output,
    format_failure,
    status_running,
)
from ._pragma import ExecSourceError, parse_exec_source

_GRACE_FROM_MS = 10_000
_GRACE_SECONDS = 1.0
_TERMINATE_GRACE = 5.0


@attrs.frozen
class ExecOutput:
    """The result of one `exec` or `wait` call.

    `output` is the `custom_tool_call_output` / `function_call_output` "output"
    value, already formatted (status header included). `notifications` are the
    `notify(v)` texts collected by this call, in order; each becomes an extra
    `custom_tool_call_output` with the exec call's `call_id` and `name: "exec"`.
    `running` is True when the cell is still live (status "running") and can be
    resumed with `CodeModeHost.wait(cell_id)`.
    """

    output: str | list[dict[str, object]]
    notifications: tuple[str, ...]
    cell_id: int
    running: bool
    status: Literal["completed", "running", "terminated", "failed"]


class CodeModeHost:
    """Runs code-mode cells for one agent, as tasks in the agent's nursery.

    Each cell gets a fresh QuickJS context with `memory_limit` bytes of heap,
    `stack_limit` bytes of stack and `step_time_limit` CPU seconds per
    synchronous step; a step exceeding it ends the cell with `Script
    terminated`. A step runs on the Trio thread and can block it for up to
    `step_time_limit`. `store()`/`load()` values persist across the cells of
    one host.

    Cancellation: if the task awaiting `exec()` is cancelled before the cell
    yielded, the cell is terminated; once a cell has yielded, cancelling a
    `wait()` leaves it running (and loses none of its output). Cancelling the
    agent nursery, or `aclose()`, terminates every cell and cancels its nested
    tool calls.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        step_time_limit: float = 2.0,
        memory_limit: int = 256 << 20,
        stack_limit: int = 1 << 20,
        default_yield_ms: int = 10_000,
        engine_factory: EngineFactory = quickjs_engine,
        first_cell_id: int = 1,
    ) -> None:
        self._nursery = nursery
        self._limits = EngineLimits(step_time_limit, memory_limit, stack_limit)
        self._default_yield_ms = default_yield_ms
        self._engine_factory = engine_factory
        self._next_cell_id = first_cell_id  # > 1 for an agent resumed mid-lineage: ids are never reused
        self._cells: dict[int, Cell] = {}  # cells whose final output is not yet returned
        self._live: set[Cell] = set()  # cells whose task has not ended
        self._store: dict[str, object] = {}
        self._closed = False

    async def exec(
        self,
        call_id: str,
        source: str,
        call_tool: ToolCaller,
        tool_names: Sequence[tuple[str, str, bool]],
        *,
        yield_now: Callable[[], bool] | None = None,
    ) -> ExecOutput:
        """Run `source` (the raw `exec` input) as a new cell.

        `tool_names` lists `(name, description, is_function_tool)` for
        `ALL_TOOLS` and the `tools` object; `tools.<name>(args)` calls
        `call_tool(name, args, f"{call_id}/code-{n}")` with n counting from 1
        per cell. Undeclared names (`tools.other(...)`) also reach `call_tool`,
        which should raise `ToolCallError(f"unsupported nested tool call: {name}")`.
        An invalid pragma returns a `Script failed` output without running
        anything. Raises `trio.ClosedResourceError` after `aclose()`.
        """
        self._check_open()
        started = trio.current_time()
        cell_id = self._next_cell_id
        self._next_cell_id += 1
        try:
            parsed = parse_exec_source(source)
        except ExecSourceError as exc:
            await trio.lowlevel.checkpoint()
            return _failure(cell_id, str(exc), started)
        cell = Cell(
            cell_id=cell_id,
            call_id=call_id,
            source=parsed,
            call_tool=call_tool,
            tools=[ToolSpec.from_tuple(entry) for entry in tool_names],
            store=self._store,
            limits=self._limits,
            engine_factory=self._engine_factory,
        )
        self._cells[cell_id] = cell
        self._live.add(cell)
        self._nursery.start_soon(self._run_cell, cell, name=f"code-mode cell {cell_id}")
        explicit = parsed.yield_time_ms
        base = started + _yield_window(self._default_yield_ms if explicit is None else explicit)

        def deadline() -> float:
            if explicit is None and cell.extend_until is not None:
                return max(base, cell.extend_until)
            return base

        return await self._observe(cell, started, deadline, parsed.max_output_tokens, yield_now=yield_now)

    async def wait(
        self,
        cell_id: int,
        yield_time_ms: int = 10_000,
        *,
        terminate: bool = False,
        max_tokens: int | None = None,
        yield_now: Callable[[], bool] | None = None,
    ) -> ExecOutput:
        """Resume observing a yielded cell: output since the last call, or its final output.

        With `terminate=True` the cell is cancelled and its remaining output is
        returned with `Script terminated` (or its final status if it had
        already ended). `max_tokens` defaults to the cell's pragma
        `max_output_tokens`, else 10,000. An unknown or already reported cell
        gives a `Script failed` output "No running cell with ID N"; a cell that
        another call is observing gives "exec cell N already has an active
        observer". Raises `trio.ClosedResourceError` after `aclose()`.
        """
        self._check_open()
        started = trio.current_time()
        cell = self._cells.get(cell_id)
        if cell is None:
            await trio.lowlevel.checkpoint()
            return _failure(cell_id, f"No running cell with ID {cell_id}", started)
        if cell.observing:
            await trio.lowlevel.checkpoint()
            return _failure(cell_id, f"exec cell {cell_id} already has an active observer", started)
        if terminate:
            cell.terminate()
        limit = trio.current_time() + _yield_window(yield_time_ms)
        tokens = cell.max_output_tokens if max_tokens is None else max_tokens
        return await self._observe(
            cell, started, lambda: limit, tokens, terminating=terminate, yield_now=yield_now
        )

    def wake_observers(self) -> None:
        """Make every active `exec`/`wait` re-check its `yield_now` (a preempting steer)."""
        for cell in self._cells.values():
            if cell.observing:
                cell.wake()

    def running_cells(self) -> list[int]:
        """Ids of cells whose task is still running, ascending.

        (A cell that ended in the background stays waitable until `wait`
        returns its final output, but is not listed here.)
        """
        return sorted(cell.id for cell in self._live)

    async def aclose(self) -> None:
        """Terminate every cell and wait for their tasks to end. Idempotent.

        If the caller is cancelled while waiting, the cells are still
        terminated; they finish on their own in the agent nursery.
        """
        self._closed = True
        self._cells.clear()
        cells = list(self._live)
        for cell in cells:
            cell.terminate()
        for cell in cells:
            await cell.finished.wait()
        await trio.lowlevel.checkpoint()

    # ---- internals -----------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the code-mode host is closed")

    async def _run_cell(self, cell: Cell) -> None:
        try:
            await cell.run()
        finally:
            self._live.discard(cell)

    async def _observe(
        self,
        cell: Cell,
        started: float,
        deadline: Callable[[], float],
        max_tokens: int | None,
        *,
        terminating: bool = False,
        yield_now: Callable[[], bool] | None = None,
    ) -> ExecOutput:
        cell.observing = True
        observed = False
        try:
            observation = await cell.observe(deadline, terminating=terminating, yield_now=yield_now)
            observed = True
        finally:
            cell.observing = False
            if not observed and not cell.detached:
                # The exec call was cancelled before the cell ever yielded: stop the
                # cell and wait (shielded, bounded) until its nested tools -- and their
                # processes -- are gone, so the caller's cleanup sees a quiet world.
                cell.terminate()
                self._cells.pop(cell.id, None)
                with trio.CancelScope(shield=True), trio.move_on_after(_TERMINATE_GRACE):
                    await cell.finished.wait()
        if observation.status == "running":
            cell.detached = True
        else:
            self._cells.pop(cell.id, None)
        content = observation.content
        if any(item.get("type") == "input_image" for item in content):
            # Fitted to their detail, without it on the wire (_image_prepare). Shielded: the
            # observation is consumed, and the work is bounded (decoding is).
            with trio.CancelScope(shield=True):
                content = await trio.to_thread.run_sync(_prepare_images, content)
        wall_time = trio.current_time() - started
        output = format_cell_output(_status_line(observation.status, cell.id), wall_time, content, max_tokens)
        return ExecOutput(
            output=output,
            notifications=observation.notifications,
            cell_id=cell.id,
            running=observation.status == "running",
            status=observation.status,
        )


def _prepare_images(content: list[dict[str, object]]) -> list[dict[str, object]]:
    from .._image_prepare import prepare_output_item

    return [prepare_output_item(item) for item in content]


def _yield_window(yield_ms: int) -> float:
    seconds = yield_ms / 1000
    return seconds + _GRACE_SECONDS if yield_ms >= _GRACE_FROM_MS else seconds


def _status_line(status: Status, cell_id: int) -> str:
    if status == "running":
        return status_running(cell_id)
    return {
        "completed": STATUS_COMPLETED,
        "terminated": STATUS_TERMINATED,
        "failed": STATUS_FAILED,
    }[status]


def _failure(cell_id: int, message: str, started: float) -> ExecOutput:
    return ExecOutput(
        output=format_failure(message, trio.current_time() - started),
        notifications=(),
        cell_id=cell_id,
        running=False,
        status="failed",
    )
