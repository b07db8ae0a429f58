"""``ToolEnvironment``: what the tools need from their agent, and what a user tool is given.

The dispatcher (``_tool_dispatch``) and the nested calls of ``exec`` cells
(``_nested_calls``) see only this, never the agent: its tools, workspace and weak
handle, the ``emit`` of its events, the nursery where cells and shell sessions live,
the runners of the opt-in namespaced groups, and what the remote tools and the exec
guard need. A user tool's handler gets a ``ToolContext`` made of it (``tool_context``),
whether the model called it directly or a cell did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..._events import EventKind
from ..._record import Record

if TYPE_CHECKING:
    from ..._base.handle import AgentHandle
    from ..._config import AgentConfig
    from ..._tools import Tools, ToolSpec
    from ..._tools._context import ToolContext
    from .._turns._turn import TurnState
    from ._permissions import ExecGuard
    from ._tool_runner import Runner

__all__ = ["GroupRunners", "ToolEnvironment", "blocking_watch", "describe", "tool_context"]

GroupRunners = Callable[[str, "TurnState"], "Runner | None"]


class ToolEnvironment(Record):
    """What tools need from their agent: its ``tools``, ``workspace``, ``handle``,
    ``emit`` and ``nursery`` (where cells and shell sessions live); ``groups``, the
    runners of the opt-in namespaced groups (namespace -> (tool name, turn) -> runner);
    for the remote tools (web__run, image_gen__imagegen) the agent's ``config`` (auth,
    api_base_url, session id, model) and its committed ``history``, read at call time;
    ``guard``, the sandbox and approval policy of exec_command/apply_patch (None:
    unconfined, never asks)."""

    __slots__ = ("tools", "workspace", "handle", "emit", "nursery", "groups", "config", "history", "guard")  # noqa: RUF023  # field order

    def __init__(
        self, tools: Tools, workspace: Path, handle: AgentHandle, emit: Callable[..., Any], nursery: trio.Nursery,
        groups: dict[str, GroupRunners] | None = None, *, config: AgentConfig | None = None,
        history: Callable[[], Iterable[Mapping[str, Any]]] = lambda: (), guard: ExecGuard | None = None,
    ) -> None:
        self.tools = tools
        self.workspace = workspace
        self.handle = handle
        self.emit = emit
        self.nursery = nursery
        self.groups: dict[str, GroupRunners] = {} if groups is None else groups
        self.config = config
        self.history = history
        self.guard = guard


def tool_context(env: ToolEnvironment, spec: ToolSpec, call_id: str, turn_id: int | None) -> ToolContext:
    """What the handler of user tool ``spec`` is given for call ``call_id``; its
    ``report`` emits ``tool.progress`` under ``turn_id`` (None: a background cell's call)."""
    from ..._tools._context import ToolContext  # user tools only: the built-ins never take one

    def progress(message: str) -> None:
        env.emit(EventKind.TOOL_PROGRESS, {"call_id": call_id, "tool": spec.name, "message": message}, turn_id)

    return ToolContext(call_id, spec.name, env.workspace, env.handle, progress=progress)


def blocking_watch(
    env: ToolEnvironment, spec: ToolSpec, call_id: str, turn_id: int | None
) -> AbstractContextManager[None]:
    """Watch user tool ``spec``'s call for steps that block the event loop: one
    ``tool.blocked`` event under ``turn_id`` for the first (see ``_blocking``)."""
    from ._blocking import watch_blocking  # user tools only

    threshold = env.tools.blocking_threshold
    if not env.tools.blocking_threshold_set and type(trio.lowlevel.current_clock()).__name__ != "SystemClock":
        threshold = None  # the default, under a virtual clock: wall time must not reach a deterministic test

    def report(seconds: float) -> None:
        assert threshold is not None
        payload = {"call_id": call_id, "tool": spec.name, "blocked_ms": round(seconds * 1000, 3),
                   "threshold_ms": round(threshold * 1000, 3)}
        env.emit(EventKind.TOOL_BLOCKED, payload, turn_id)

    return watch_blocking(threshold, report)


def describe(exc: BaseException) -> str:
    """``Type: message`` of a tool's exception, even when its ``str()`` itself fails."""
    try:
        message = str(exc)
    except Exception:
        message = "<the exception could not be turned into text>"
    return f"{type(exc).__name__}: {message}"[:2000]
