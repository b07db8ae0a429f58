"""Tool registry: the built-in ``exec``/``wait`` pair and user tools.

``Tools`` is a small builder. The model sees ``exec`` (custom tool: JavaScript that
calls every host tool as ``tools.<name>(...)``) and ``wait`` first, then user tools,
in the ``additional_tools`` prefix item (SPEC sec. 2 and 7). User handlers are
``async`` callables ``handler(ctx, args)`` run inside the turn's cancel scope, so a
cancelled turn cancels them. ``args`` is the decoded JSON object for function tools
and the raw input string for custom tools. A handler returns a string, a list of
content items (``input_text``/``input_image``) or any JSON value (sent as compact
JSON); raising an exception answers the model with a failed output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .._errors import ConfigError
from ._definitions import (
    BUILTIN_NAMES,
    NESTED_BUILTINS,
    exec_definition,
    wait_definition,
)
from ._namespaces import COLLABORATION, CollaborationOptions, collaboration_namespace

if TYPE_CHECKING:
    from .._runtime import Agent, AgentHandle

__all__ = ["Handler", "ToolContext", "ToolSpec", "Tools"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@attrs.frozen
class ToolContext:
    """What a tool handler sees: its call id, the workspace and the agent handle."""

    call_id: str
    tool: str
    workspace: Path
    agent: AgentHandle
    _progress: Callable[[str], None] = attrs.field(alias="progress", repr=False)

    def report(self, message: str) -> None:
        """Emit a ``tool.progress`` event for this call (never blocks)."""
        self._progress(message)


Handler = Callable[[ToolContext, Any], Awaitable[Any]]


@attrs.frozen
class ToolSpec:
    name: str
    kind: Literal["function", "custom"]
    description: str
    handler: Handler
    parameters: dict[str, Any] | None = None

    def definition(self) -> dict[str, Any]:
        if self.kind == "custom":
            return {"type": "custom", "name": self.name, "description": self.description}
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "strict": False,
            "parameters": self.parameters or {"type": "object", "properties": {}},
        }


class Tools:
    """The tools of an agent: built-ins (``default()``) or none (``empty()``), plus user tools."""

    def __init__(self, *, builtins: bool = True) -> None:
        self._builtins = builtins
        self._user: dict[str, ToolSpec] = {}
        self._groups: dict[str, dict[str, Any]] = {}  # opt-in namespaced groups, by namespace
        self._collaboration: CollaborationOptions | None = None

    @classmethod
    def default(cls) -> Tools:
        """``exec`` (with ``exec_command`` and ``apply_patch`` inside it) and ``wait``."""
        return cls(builtins=True)

    @classmethod
    def empty(cls) -> Tools:
        """No built-in tools at all; register your own."""
        return cls(builtins=False)

    @property
    def has_builtins(self) -> bool:
        return self._builtins

    def with_clock(self) -> Tools:
        """Add the ``clock`` namespace: ``clock.sleep {duration_ms}`` (1 ms to 12 h), which
        returns early when new input arrives; returns ``self`` for chaining."""
        from ._namespaces import CLOCK, clock_namespace

        self._groups[CLOCK] = clock_namespace()
        return self

    def with_collaboration(
        self,
        *,
        max_workers: int = 8,
        max_depth: int = 1,
        trigger_turn: bool = False,
        watch: Callable[[Agent], Awaitable[None]] | None = None,
    ) -> Tools:
        """Add the ``collaboration`` namespace; returns ``self`` for chaining.

        ``collaboration.wait_agent {timeout_ms?}`` waits for mail from another agent
        (1 s to 1 h, default 30 s; a shorter request is raised to 1 s with a note). With
        ``max_workers`` > 0 (default 8, at most 64) the model can also run *workers*:
        ``spawn_agent {name, task}`` starts a clean child ``<path>/<name>`` (``Agent.spawn``)
        in the agent's nursery and prompts it, ``send_input {name, text}`` submits more
        input to it (a steer while it is busy), ``close_agent {name}`` cancels and closes
        it. Each finished worker turn is posted to the agent as mail from the worker's path
        (its final message, or a short failure text): queue-only by default, so it wakes
        ``wait_agent``/``clock.sleep`` and joins the running turn at its next request or the
        next turn; ``trigger_turn=True`` makes it start a turn when the agent is idle.
        Workers live as long as their agent: closing (or cancelling) it closes them.
        Workers may spawn workers of their own only while their path is less than
        ``max_depth`` levels below ``/root`` (default 1: only the root runs workers).
        ``watch``, if given, is an async callable run beside each worker for its lifetime
        with the worker's ``Agent`` (e.g. to read ``worker.events``); it should return
        once those events end, and an exception it raises propagates out of the agent
        like one raised in its block. Without ``watch`` a worker's events are read and
        dropped. A worker's turns are not cancelled with the turn that spawned it.
        """
        options = CollaborationOptions(max_workers, max_depth, bool(trigger_turn), watch)
        self._collaboration = options
        self._groups[COLLABORATION] = collaboration_namespace(options.max_workers)
        return self

    @property
    def collaboration(self) -> CollaborationOptions | None:
        """The ``with_collaboration`` settings, or None when the group is off."""
        return self._collaboration

    def with_group(self, namespace: str, definition: dict[str, Any]) -> Tools:
        """Add a built-in namespaced tool group (its ``namespace`` definition)."""
        self._groups[namespace] = definition
        return self

    def has_group(self, namespace: str) -> bool:
        return namespace in self._groups

    def function(
        self, name: str, description: str, json_schema: dict[str, Any], handler: Handler
    ) -> Tools:
        """Register a function tool (JSON arguments); returns ``self`` for chaining."""
        if not isinstance(json_schema, dict) or json_schema.get("type", "object") != "object":
            raise ConfigError(
                f"tool {name!r}: json_schema must be a JSON Schema object such as "
                '{"type": "object", "properties": {...}}'
            )
        try:
            schema = json.loads(json.dumps(json_schema, allow_nan=False))  # a private, plain-JSON copy
        except (TypeError, ValueError, RecursionError) as exc:
            raise ConfigError(
                f"tool {name!r}: json_schema must be plain JSON data (dicts with string keys, lists, "
                f"strings, finite numbers, booleans, null); it cannot be encoded: {exc}"
            ) from None
        self._add(ToolSpec(name, "function", description, handler, schema))
        return self

    def custom(self, name: str, description: str, handler: Handler) -> Tools:
        """Register a custom (freeform text input) tool; returns ``self`` for chaining."""
        self._add(ToolSpec(name, "custom", description, handler))
        return self

    def _add(self, spec: ToolSpec) -> None:
        if not isinstance(spec.name, str) or not _NAME.match(spec.name):
            raise ConfigError(
                f"tool name {spec.name!r} is invalid; use letters, digits and underscores "
                "(at most 64 characters, not starting with a digit)"
            )
        reserved = BUILTIN_NAMES | (NESTED_BUILTINS if self._builtins else frozenset())
        if spec.name in reserved:
            raise ConfigError(f"tool name {spec.name!r} is taken by a built-in tool; rename it")
        if spec.name in self._user:
            raise ConfigError(f"tool {spec.name!r} is registered twice; tool names must be unique")
        if not isinstance(spec.description, str):
            raise ConfigError(f"tool {spec.name!r}: description must be a string")
        if not callable(spec.handler):
            raise ConfigError(f"tool {spec.name!r}: handler must be an async callable")
        self._user[spec.name] = spec

    def user_tool(self, name: str) -> ToolSpec | None:
        return self._user.get(name)

    @property
    def user_tools(self) -> tuple[ToolSpec, ...]:
        return tuple(self._user.values())

    def definitions(self) -> list[dict[str, Any]]:
        """The ``additional_tools`` list: ``exec`` and ``wait`` first, then user tools."""
        defs: list[dict[str, Any]] = []
        if self._builtins:
            defs.append(exec_definition(self.user_tools))
            defs.append(wait_definition())
        defs.extend(spec.definition() for spec in self._user.values())
        defs.extend(self._groups.values())
        return defs

    def top_level_names(self) -> frozenset[str]:
        names = set(self._user)
        if self._builtins:
            names |= BUILTIN_NAMES
        return frozenset(names)
