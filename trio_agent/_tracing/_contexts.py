"""Making a span current in the task that runs its work.

While a turn and each of its tool calls run, its span is made the *current*
OpenTelemetry span of the task that emitted the start event (the turn runner task,
or a code-mode cell's nested-call task), so that spans the application opens there --
a user tool handler, an instrumented HTTP client -- are its children. A tool span is
made current on its start event; a turn's span when it starts, which is when the
first thing needs it (``AgentTracer._live``: a tool call, a connection, a steer, a
child agent, a turn accepted in the runner task; over HTTPS, the turn's start) -- in
the runner task. Each is restored on its end event, which the runtime emits from the
same task. Restoring follows strict LIFO order per task and never
touches another task's context; what is left over (a bug path with no end event) is
restored when the turn ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from opentelemetry import context as otel_context

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context

__all__ = ["TaskContexts"]

Key = tuple[str, object]


class TaskContexts:
    def __init__(self) -> None:
        self._stacks: dict[trio.lowlevel.Task, list[tuple[Key, Token[Context]]]] = {}

    def attach(self, key: Key, context: Context) -> None:
        """Make ``context`` (a span's: ``trace.set_span_in_context``) current in this task."""
        token = otel_context.attach(context)
        self._stacks.setdefault(trio.lowlevel.current_task(), []).append((key, token))

    def detach(self, key: Key) -> None:
        """Restore what was current before ``key`` was attached (in this task only)."""
        task = trio.lowlevel.current_task()
        stack = self._stacks.get(task)
        if not stack or all(entry != key for entry, _ in stack):
            return
        while stack:
            entry, token = stack.pop()
            otel_context.detach(token)
            if entry == key:
                break
        if not stack:
            del self._stacks[task]

    def detach_all(self) -> None:
        """Restore everything this task still has attached."""
        stack = self._stacks.get(trio.lowlevel.current_task())
        if stack:
            self.detach(stack[0][0])  # the oldest entry: everything above it goes first
