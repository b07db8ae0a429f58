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

if TYPE_CHECKING:
    from .._runtime import AgentHandle

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
