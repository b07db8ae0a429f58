"""``clock.sleep {duration_ms}``: wait on Trio's clock, returning early on new input.

Codex's sleep tool (codex.md 3.7): 1 ms to 12 h; if input is already waiting, or any
arrives while it sleeps (a steer, an injected item, mail -- queue-only mail included),
it returns at once with ``Wall time: X seconds\\nSleep interrupted by new input.``,
else ``...\\nSleep completed.``. It emits ``sleep.started`` and ``sleep.completed`` and
records the finished sleep in the rollout (an ``item_completed`` event line with
``{"type": "sleep", "id": call_id, "duration_ms": N}``). A cancelled turn cancels it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import trio

from ..._events import EventKind
from ..._tools._namespaces import SLEEP_MAX_MS, SLEEP_MIN_MS
from ..._units import ns
from .._turns._turn import TurnState
from ._tool_runner import Runner, ToolOutcome

__all__ = ["SleepTool", "sleep_output"]


def sleep_output(seconds: float, *, interrupted: bool) -> str:
    ending = "Sleep interrupted by new input." if interrupted else "Sleep completed."
    return f"Wall time: {seconds:.4f} seconds\n{ending}"


def _duration(arguments: Any) -> int | str:
    """The duration in ms, or the message of a failed output."""
    value = arguments.get("duration_ms") if isinstance(arguments, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return f"clock.sleep needs duration_ms, a number of milliseconds, got {json.dumps(value)[:60]}"
    if not SLEEP_MIN_MS <= value <= SLEEP_MAX_MS:
        return f"clock.sleep duration_ms must be from {SLEEP_MIN_MS} to {SLEEP_MAX_MS} (12 h), got {value:g}"
    return int(value)


class SleepTool:
    def __init__(
        self,
        *,
        pending: Callable[[TurnState], bool],
        emit: Callable[..., Any],
        record_event: Callable[[dict[str, Any]], None],
    ) -> None:
        self._pending = pending
        self._emit = emit
        self._record_event = record_event

    def runner(self, state: TurnState) -> Runner:
        async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
            duration = _duration(arguments)
            if isinstance(duration, str):
                await trio.lowlevel.checkpoint()
                return ToolOutcome(duration, "failed")
            call_id = call.get("call_id", "")
            item = {"id": call_id, "duration_ms": duration}
            self._emit(EventKind.SLEEP_STARTED, item, state.turn_id)
            start = trio.current_time()
            interrupted = self._pending(state)
            if interrupted:
                await trio.lowlevel.checkpoint()
            else:
                seen = state.activity.count
                with trio.move_on_after(duration / 1000):
                    await state.activity.wait_after(seen)
                    interrupted = True
            elapsed = trio.current_time() - start
            self._emit(EventKind.SLEEP_COMPLETED, {**item, "interrupted": interrupted, "wall_time_ns": ns(elapsed)},
                       state.turn_id)
            self._record_event({"type": "item_completed", "item": {"type": "sleep", **item}})
            return ToolOutcome(sleep_output(elapsed, interrupted=interrupted), "completed")

        return run
