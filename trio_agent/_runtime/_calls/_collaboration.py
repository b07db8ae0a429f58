"""Agents that talk to each other: mail addresses, the ``collaboration`` group, ``wait_agent``.

Theory of operation (SPEC sec. 10; codex.md 3.2 and 3.7):

- Every agent has a ``MailAddress``: its path and its ``post_mail``, open for as long
  as the agent is. A child (spawn or fork) holds its parent's address, so
  ``post_to_parent`` reaches the parent's mailbox; the parent reaches a child with
  ``child.post_mail(parent.path, text)``. An address is closed (and drops its agent)
  when the agent shuts down; posting to it then raises ``AgentClosed``.
- ``collaboration.wait_agent {timeout_ms?}`` waits on the agent's input-activity
  signal: mail -> ``Wait completed.``, a steer or injected item (or a queued prompt) ->
  ``Wait interrupted by new input.``, nothing -> ``Wait timed out.``. Input already
  waiting when it starts ends it at once, classified the same way (a steer first).
  The timeout is clamped up to ``WAIT_MIN_MS`` with a note; above ``WAIT_MAX_MS`` it is
  a failed output (as codex).
- The worker tools (``spawn_agent``, ``send_input``, ``send_message``, ``followup_task``,
  ``close_agent``) and the workers' suspension are ``_workers``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import trio

from ..._errors import AgentClosed
from ..._events import EventKind
from ..._tools._namespaces import WAIT_DEFAULT_MS, WAIT_MAX_MS, WAIT_MIN_MS, CollaborationOptions
from ._tool_runner import Runner, ToolOutcome, json_text

if TYPE_CHECKING:
    from ..._session.snapshot import SessionSnapshot
    from .._turns._queue import TurnQueue
    from .._turns._turn import Turn, TurnState
    from ._workers import WorkerAgent, Workers

A = TypeVar("A", bound="WorkerAgent")  # as _workers.A: that module is loaded only by an agent with workers

__all__ = ["Collaboration", "MailAddress", "wait_output"]


WaitOutcome = Literal["completed", "interrupted", "timed_out"]
_WAIT_MESSAGES: dict[WaitOutcome, str] = {
    "completed": "Wait completed.",
    "interrupted": "Wait interrupted by new input.",
    "timed_out": "Wait timed out.",
}


class MailAddress:
    """Where mail for one agent goes: its ``path`` and its ``post_mail``, while it is open."""

    def __init__(self, path: str, post: Callable[..., Awaitable[Turn | None]]) -> None:
        self.path = path
        self._post: Callable[..., Awaitable[Turn | None]] | None = post

    async def post(self, author: str, text: str, *, trigger_turn: bool) -> Turn | None:
        if self._post is None:
            raise AgentClosed(f"agent {self.path} has closed; mail to it cannot be delivered")
        return await self._post(author, text, trigger_turn=trigger_turn)

    def close(self) -> None:
        self._post = None  # also drops the reference to the agent


# -- wait_agent ------------------------------------------------------------------------


def wait_output(outcome: WaitOutcome, timeout_ms: int, requested_ms: int | None) -> str:
    """The JSON output of ``wait_agent`` (with the clamp note when the request was too short)."""
    message = _WAIT_MESSAGES[outcome]
    if requested_ms is not None and requested_ms < timeout_ms:
        message += (f"\n\nThe requested timeout_ms {requested_ms} is below the minimum; "
                    f"waited up to {timeout_ms} ms instead.")
    return json_text({"message": message, "timed_out": outcome == "timed_out"})


def _wait_timeout(arguments: Any) -> tuple[int, int | None] | str:
    """``(timeout_ms, requested_ms)``, or the message of a failed output."""
    if arguments in ("", None):
        arguments = {}
    if not isinstance(arguments, dict):
        return f'collaboration.wait_agent takes a JSON object such as {{"timeout_ms": {WAIT_DEFAULT_MS}}}'
    unknown = sorted(set(arguments) - {"timeout_ms"})
    if unknown:
        return f"collaboration.wait_agent takes only timeout_ms; unknown field(s): {', '.join(unknown)}"
    value = arguments.get("timeout_ms")
    if value is None:
        return WAIT_DEFAULT_MS, None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value != int(value):
        return f"collaboration.wait_agent timeout_ms must be a whole number of milliseconds, got {_shown(value)}"
    if value > WAIT_MAX_MS:
        return f"collaboration.wait_agent timeout_ms must be at most {WAIT_MAX_MS} (1 hour), got {int(value)}"
    return max(int(value), WAIT_MIN_MS), int(value)


def _shown(value: Any) -> str:
    return json.dumps(value)[:60]


class Collaboration(Generic[A]):
    """The ``collaboration`` group of one agent: ``wait_agent`` and, with
    ``max_workers`` > 0, the worker tools (``Workers``)."""

    def __init__(
        self,
        options: CollaborationOptions,
        *,
        path: str,
        spawn: Callable[[str], AbstractAsyncContextManager[A]],
        watch: Callable[[A], Awaitable[None]] | None,
        queue: TurnQueue,
        nursery: trio.Nursery,
        emit: Callable[..., Any],
        reopen: Callable[[str, str, SessionSnapshot], AbstractAsyncContextManager[A]] | None = None,
    ) -> None:
        self._queue = queue
        self._emit = emit
        self._workers: Workers[A] | None = None
        if options.max_workers:
            from ._workers import Workers

            self._workers = Workers(options, path=path, spawn=spawn, watch=watch, nursery=nursery, reopen=reopen)

    def runner(self, name: str, state: TurnState) -> Runner | None:
        """The runner of tool ``name`` for the turn ``state`` (None: not in this group)."""
        if name == "wait_agent":
            async def wait(call: dict[str, Any], arguments: Any) -> ToolOutcome:
                return await self._wait_agent(state, call, arguments)

            return wait
        workers = self._workers
        tool = {"spawn_agent": workers.spawn_agent, "send_input": workers.send_input,
                "send_message": workers.send_message, "followup_task": workers.followup_task,
                "close_agent": workers.close_agent}.get(name) if workers is not None else None
        if tool is None:
            return None

        async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
            return await tool(arguments)

        return run

    async def reload_worker(self, name: str) -> A:
        """Worker ``name``'s agent, reloaded first if it was suspended (``Workers.reload``)."""
        if self._workers is None:
            raise AgentClosed("this agent runs no workers (with_collaboration(max_workers=0))")
        return await self._workers.reload(name)

    def close(self) -> None:
        """The agent is shutting down: every worker is cancelled (never blocks)."""
        if self._workers is not None:
            self._workers.close()

    def _waiting(self, state: TurnState) -> WaitOutcome | None:
        """What already waits for the turn: a steer (or injected item, or queued
        prompt) interrupts, mail completes."""
        queue = self._queue
        if state.pending_count or queue.queued or queue.idle_items:
            return "interrupted"
        return "completed" if len(queue.mailbox) else None

    async def _wait_agent(self, state: TurnState, call: dict[str, Any], arguments: Any) -> ToolOutcome:
        parsed = _wait_timeout(arguments)
        if isinstance(parsed, str):
            await trio.lowlevel.checkpoint()
            return ToolOutcome(parsed, "failed")
        timeout_ms, requested_ms = parsed
        self._emit(EventKind.TOOL_PROGRESS, {
            "call_id": call.get("call_id", ""), "tool": "wait_agent",
            "message": f"waiting up to {timeout_ms} ms for mail",
        }, state.turn_id)
        outcome = self._waiting(state)
        if outcome is not None:
            await trio.lowlevel.checkpoint()
        else:
            seen = state.activity.count
            outcome = "timed_out"
            with trio.move_on_after(timeout_ms / 1000):
                kind = await state.activity.wait_after(seen)
                outcome = "interrupted" if kind == "steer" else "completed"
        return ToolOutcome(wait_output(outcome, timeout_ms, requested_ms), "completed")
