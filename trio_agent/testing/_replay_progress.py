"""The order a replay keeps: which cassette lines have happened again, which inputs
were given again (``Progress``), and the recorded gaps between one connection's steps,
scaled (``Pace``). All waiting is on Trio primitives and Trio's clock."""

from __future__ import annotations

import bisect

import trio

from .._cassette.format import Cassette, Observation

__all__ = ["Pace", "Progress"]


class Progress:
    """Which cassette lines have happened again, and which inputs were given again."""

    def __init__(self, cassette: Cassette, gated_inputs: list[int]) -> None:
        self._lines = [obs.line for obs in cassette.observations]
        self._done: set[int] = set()
        self._frontier = 0  # index into _lines of the first line not done
        self._inputs = gated_inputs
        self._inputs_done = 0
        self._changed = trio.Event()

    def done(self, line: int) -> None:
        self._done.add(line)
        while self._frontier < len(self._lines) and self._lines[self._frontier] in self._done:
            self._frontier += 1
        self._changed.set()
        self._changed = trio.Event()

    def input_delivered(self, line: int) -> None:
        self._inputs_done += 1
        self.done(line)

    async def inputs_before(self, line: int) -> None:
        needed = bisect.bisect_left(self._inputs, line)
        while self._inputs_done < needed:
            await self._changed.wait()

    async def all_before(self, line: int) -> None:
        while self._frontier < len(self._lines) and self._lines[self._frontier] < line:
            await self._changed.wait()

    def is_done(self, line: int) -> bool:
        return line in self._done

    async def changed(self) -> None:
        """Wait until some line is done or some input given."""
        await self._changed.wait()

    async def all_done(self) -> None:
        while self._frontier < len(self._lines):
            await self._changed.wait()

    def pending(self) -> list[int]:
        return [line for line in self._lines if line not in self._done]


class Pace:
    """The recorded gaps between one connection's steps, scaled by ``timing``."""

    def __init__(self, timing: float, start: Observation) -> None:
        self._timing = timing
        self._last_t = start.t
        self._last_at = trio.current_time()

    async def wait(self, step: Observation) -> None:
        if self._timing > 0:
            await trio.sleep_until(self._last_at + (step.t - self._last_t) * self._timing)

    def stepped(self, step: Observation) -> None:
        self._last_t = step.t
        self._last_at = trio.current_time()
