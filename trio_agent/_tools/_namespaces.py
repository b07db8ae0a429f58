"""Namespaced built-in tool groups, opt-in: ``clock`` (``sleep``) and ``collaboration``
(``wait_agent`` and the multi-agent tools).

The model sees each group as one Responses ``namespace`` tool
(``{"type": "namespace", "name": ..., "description": ..., "tools": [function tools]}``)
and calls its tools with ``function_call`` items that carry ``namespace``. Definitions
are our own wording; shapes and limits follow codex (codex.md 3.7).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Never

from .._errors import ConfigError
from .._record import Record

__all__ = [
    "CLOCK",
    "COLLABORATION",
    "MAX_WORKERS_LIMIT",
    "SLEEP_MAX_MS",
    "SLEEP_MIN_MS",
    "WAIT_DEFAULT_MS",
    "WAIT_MAX_MS",
    "WAIT_MIN_MS",
    "CollaborationOptions",
    "clock_namespace",
    "collaboration_namespace",
    "namespace_definition",
]

CLOCK = "clock"
SLEEP_MIN_MS = 1
SLEEP_MAX_MS = 12 * 60 * 60 * 1000  # 12 h

COLLABORATION = "collaboration"
WAIT_MIN_MS = 1_000  # a shorter request is raised to this, with a note in the output (codex)
WAIT_DEFAULT_MS = 30_000
WAIT_MAX_MS = 60 * 60 * 1000  # 1 h; a longer request is a failed output (codex)
MAX_WORKERS_LIMIT = 64  # the most ``max_workers`` may be: every worker holds a socket


def _check_options(options: CollaborationOptions) -> None:
    if isinstance(options.max_workers, bool) or not isinstance(options.max_workers, int) \
            or not 0 <= options.max_workers <= MAX_WORKERS_LIMIT:
        raise ConfigError(
            f"with_collaboration(max_workers=...) must be an int from 0 (wait_agent only) to "
            f"{MAX_WORKERS_LIMIT}, got {options.max_workers!r}"
        )
    if isinstance(options.max_depth, bool) or not isinstance(options.max_depth, int) or options.max_depth < 1:
        raise ConfigError(f"with_collaboration(max_depth=...) must be an int of at least 1, got {options.max_depth!r}")
    if options.watch is not None and not callable(options.watch):
        raise ConfigError("with_collaboration(watch=...) must be an async callable taking the worker agent")


class CollaborationOptions(Record):
    """The settings of ``Tools.with_collaboration`` (see there), checked.

    ``watch`` is kept as given, typed ``Callable[[Never], ...]``: what it accepts is
    a ``ta.Agent`` or a protocol one meets (``AgentLike``), which only the runtime,
    the one caller, knows to be an ``Agent``."""

    __slots__ = ("max_workers", "max_depth", "trigger_turn", "watch")  # noqa: RUF023  # field order

    def __init__(
        self, max_workers: int = 8, max_depth: int = 1, trigger_turn: bool = False,
        watch: Callable[[Never], Awaitable[None]] | None = None,
    ) -> None:
        self.max_workers = max_workers
        self.max_depth = max_depth
        self.trigger_turn = trigger_turn
        self.watch = watch
        _check_options(self)


def namespace_definition(name: str, description: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "namespace", "name": name, "description": description, "tools": tools}


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "name": name, "description": description, "strict": False, "parameters": parameters}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def clock_namespace() -> dict[str, Any]:
    sleep = _function(
        "sleep",
        "Wait for a while without using tokens, e.g. for a long-running job or for other agents. "
        "Returns early, saying so, as soon as new input arrives (a message from the user or "
        "another agent).",
        _object({"duration_ms": {
            "type": "number", "description": f"How long to sleep, {SLEEP_MIN_MS} ms to 12 hours.",
        }}, ["duration_ms"]),
    )
    return namespace_definition(CLOCK, "Time: wait without working.", [sleep])


_NAME = {
    "type": "string",
    "description": "The worker's name: letters, digits, '_' or '-' (1-64); its mail address is <your path>/<name>.",
}


def _wait_agent() -> dict[str, Any]:
    return _function(
        "wait_agent",
        "Wait until a message from another agent arrives (e.g. a worker's answer). Returns "
        '{"message", "timed_out"}: "Wait completed." when mail arrived (it is in your next '
        'input), "Wait interrupted by new input." when the user sent input, "Wait timed out." '
        "otherwise. Returns at once if input is already waiting.",
        _object({"timeout_ms": {
            "type": "number",
            "description": f"How long to wait at most, {WAIT_MIN_MS} to {WAIT_MAX_MS} ms (1 hour); "
                           f"default {WAIT_DEFAULT_MS}.",
        }}, []),
    )


def _worker_tools(max_workers: int) -> list[dict[str, Any]]:
    spawn = _function(
        "spawn_agent",
        f"Start a worker agent (at most {max_workers} at a time) with the same tools and instructions "
        "as you and no history, and give it a task. It works in parallel with you; each of its answers "
        "reaches you as a message from its path (wait_agent waits for one).",
        _object({"name": _NAME, "task": {"type": "string", "description": "The worker's first prompt."}},
                ["name", "task"]),
    )
    send = _function(
        "send_input",
        "Send more input to a worker: it joins the worker's running turn, or starts a new turn when the "
        "worker is idle. Its answer reaches you as a message.",
        _object({"name": _NAME, "text": {"type": "string", "description": "The input for the worker."}},
                ["name", "text"]),
    )
    message = _function(
        "send_message",
        "Send a worker a message it reads with its next request: it joins the worker's running turn, or "
        "waits for its next turn; it does not start one. Use it for notes that need no answer now.",
        _object({"name": _NAME, "text": {"type": "string", "description": "The message."}}, ["name", "text"]),
    )
    followup = _function(
        "followup_task",
        "Give a worker a follow-up task as a message: it starts a turn of the worker (with any messages "
        "waiting for it) when the worker is idle, or joins its running turn. Its answer reaches you as a "
        "message.",
        _object({"name": _NAME, "text": {"type": "string", "description": "The follow-up task."}},
                ["name", "text"]),
    )
    close = _function(
        "close_agent",
        "Close a worker: a running turn is cancelled and its tools are stopped. Frees its slot and name.",
        _object({"name": _NAME}, ["name"]),
    )
    return [spawn, send, message, followup, _wait_agent(), close]


def collaboration_namespace(max_workers: int) -> dict[str, Any]:
    tools = _worker_tools(max_workers) if max_workers else [_wait_agent()]
    return namespace_definition(COLLABORATION, "Work with other agents: run workers and wait for their messages.",
                                tools)
