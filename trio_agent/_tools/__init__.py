"""Tool registry: the built-in ``exec``/``wait`` pair, the nested built-ins, MCP
servers and user tools.

``Tools`` is a small builder. The model sees ``exec`` (custom tool: JavaScript that
calls every host tool as ``tools.<name>(...)``) and ``wait`` first, then user tools,
in the ``additional_tools`` prefix item (SPEC sec. 2 and 7). The nested built-ins
(``exec_command``, ``write_stdin``, ``apply_patch``, ``update_plan``, ``view_image``,
``web__run`` unless turned off, ``image_gen__imagegen`` when turned on, and
``tool_search`` with MCP servers) are reached only from ``exec``. User handlers are
``async`` callables ``handler(ctx, args)`` run inside the turn's cancel scope, so a
cancelled turn cancels them; a sync handler is wrapped at registration to run in a
worker thread, abandoned when the turn is cancelled (``_threaded``). ``args`` is the
decoded JSON object for function tools and the raw input string for custom tools. A
handler returns a string, a list of content items (``input_text``/``input_image``) or
any JSON value (sent as compact JSON); raising an exception answers the model with a
failed output. Typed tools
(``tool`` / ``Tools.add``) derive their schema from the function and have their
arguments checked before it runs.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, Protocol, TypeVar

import attrs

from .._errors import ConfigError
from .._event_payloads._shared import JsonValue  # one JSON type for tools and events
from ._definitions import (
    BUILTIN_NAMES,
    IMAGE_GENERATION,
    MCP_RESOURCE_TOOLS,
    NESTED_BUILTINS,
    TOOL_SEARCH,
    WEB_SEARCH,
    NestedTool,
    builtin_nested_tools,
    exec_definition,
    wait_definition,
)
from ._namespaces import COLLABORATION, CollaborationOptions, collaboration_namespace
from ._tool_errors import InvalidToolArguments, NestedToolError
from ._ts import ts_type

if TYPE_CHECKING:
    from .._base.handle import AgentLike
    from ._context import ToolContext
    from ._mcp_config import McpServer

__all__ = [
    "Handler",
    "InvalidToolArguments",
    "JsonValue",
    "NestedToolError",
    "ToolDecorator",
    "ToolSpec",
    "Tools",
    "tool",
]


@functools.cache
def _tool_name() -> re.Pattern[str]:
    return re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # compiled on first use (see _jsontext)


DEFAULT_BLOCKING_THRESHOLD = 0.1  # seconds a user tool may hold the event loop before tool.blocked
DEFAULT_DEFER_ABOVE = 16  # MCP tools beyond this many (in all) are found through tool_search


_P = ParamSpec("_P")  # a typed tool's own parameters (Tools.add)
ArgsT = TypeVar("ArgsT", contravariant=True)
_Watched = TypeVar("_Watched", bound="AgentLike")  # what a worker's watch takes: ta.Agent, or a protocol it meets


class Handler(Protocol[ArgsT]):
    """A tool's code: ``async def handler(ctx: ta.ToolContext, args) -> result``.

    ``args`` is the decoded JSON object (``Handler[dict[str, JsonValue]]``) for a
    function tool and the raw input text (``Handler[str]``) for a custom tool. It runs
    in the turn's nursery, so cancelling the turn cancels it. It returns a string, a
    list of content items (``input_text``/``input_image``) or any JSON value (sent as
    compact JSON); raising an exception answers the model with a failed result.
    ``Tools.function``/``custom`` also take a sync ``def handler(ctx, args)``, run in a
    worker thread (see ``ta.tool``).
    """

    def __call__(self, ctx: ToolContext, args: ArgsT, /) -> Awaitable[object]: ...


@attrs.frozen
class ToolSpec:
    """A registered tool: what the model is told (``definition()``) and its handler.

    ``parameters`` is the JSON schema of a function tool's arguments (None for a
    custom tool); ``output_schema`` describes what it returns, when known (shown to
    the model in the ``exec`` description); ``strict`` asks the API to hold the model
    to the schema (set for typed tools whose schema allows it). Build one with
    ``ta.tool`` from a typed function, or let ``Tools.function``/``custom`` build it.
    """

    name: str
    kind: Literal["function", "custom"]
    description: str
    handler: Handler[dict[str, JsonValue]] | Handler[str]
    parameters: dict[str, JsonValue] | None = None
    output_schema: dict[str, JsonValue] | None = None
    strict: bool = False

    def definition(self) -> dict[str, Any]:
        if self.kind == "custom":
            return {"type": "custom", "name": self.name, "description": self.description}
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "strict": self.strict,
            "parameters": self.parameters or {"type": "object", "properties": {}},
        }

    def nested(self) -> NestedTool:
        """How ``exec`` declares it."""
        output = ts_type(self.output_schema) if self.output_schema is not None else "unknown"
        return NestedTool(self.name, self.description, self.parameters if self.kind == "function" else None, output)


class Tools:
    """The tools of an agent: built-ins (``default()``) or none (``empty()``), plus user tools."""

    def __init__(self, *, builtins: bool = True) -> None:
        self._builtins = builtins
        self._web_search = builtins  # web__run: on by default with the built-ins (nanocodex)
        self._image_generation = False
        self._mcp: dict[str, McpServer] = {}
        self._defer_above = DEFAULT_DEFER_ABOVE
        self._user: dict[str, ToolSpec] = {}
        self._groups: dict[str, dict[str, Any]] = {}  # opt-in namespaced groups, by namespace
        self._collaboration: CollaborationOptions | None = None
        self._blocking_threshold: float | None = DEFAULT_BLOCKING_THRESHOLD
        self._blocking_set = False  # with_blocking_warning was called

    @classmethod
    def default(cls) -> Tools:
        """``exec`` (with the nested built-ins inside it: the shell, ``apply_patch``,
        ``update_plan``, ``view_image`` and ``web__run``) and ``wait``."""
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
        watch: Callable[[_Watched], Awaitable[None]] | None = None,
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
        (``watch`` may take a ``ta.Agent``, or any protocol one meets: the tools name
        the agent through ``AgentLike``, below the runtime.)
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
        self,
        name: str,
        description: str,
        json_schema: Mapping[str, object],
        handler: Handler[dict[str, JsonValue]] | Callable[[ToolContext, dict[str, JsonValue]], object],
    ) -> Tools:
        """Register a function tool (JSON arguments); returns ``self`` for chaining.

        ``handler`` is ``async def handler(ctx, args)``, or a sync function, which runs
        in a worker thread (see ``ta.tool``: a cancelled turn abandons it)."""
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
        self._add(ToolSpec(name, "function", description, handler, schema))  # type: ignore[arg-type]
        return self

    def custom(
        self, name: str, description: str, handler: Handler[str] | Callable[[ToolContext, str], object]
    ) -> Tools:
        """Register a custom (freeform text input) tool; returns ``self`` for chaining.
        A sync ``handler`` runs in a worker thread, as for ``function``."""
        self._add(ToolSpec(name, "custom", description, handler))  # type: ignore[arg-type]
        return self

    def add(
        self,
        fn: ToolSpec | Callable[_P, object],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Tools:
        """Register a typed tool: a ``ToolSpec`` from ``ta.tool``, or a function
        (``async def`` or sync) whose JSON schema is derived from its type hints and docstring (see
        ``ta.tool``); returns ``self`` for chaining."""
        spec = fn if isinstance(fn, ToolSpec) else tool(fn, name=name, description=description)
        if isinstance(fn, ToolSpec) and (name is not None or description is not None):
            spec = attrs.evolve(spec, name=name or spec.name, description=description or spec.description)
        self._add(spec)
        return self

    def without_web_search(self) -> Tools:
        """Turn off ``web__run`` (remote web search, on by default); returns ``self``."""
        self._web_search = False
        return self

    def with_image_generation(self) -> Tools:
        """Add ``image_gen__imagegen`` (``gpt-image-2`` through ``{api_base_url}/images/...``);
        returns ``self``."""
        self._need_exec("image generation is")
        self._check_free(IMAGE_GENERATION)
        self._image_generation = True
        return self

    def with_mcp(self, name: str, server: McpServer) -> Tools:
        """Add an MCP server: its tools are ``tools.mcp__<name>__<tool>(args)`` in
        ``exec``, found with ``tools.tool_search``. The agent starts it in the
        background when it opens and stops it when it closes (each agent, fork or child
        runs its own); a call made while it starts waits for it (at most its
        ``startup_timeout``). ``name``: 1-48 letters and digits joined by single ``-``
        or ``_``, its JavaScript form (``-`` as ``_``) unlike any other server's.
        Returns ``self``."""
        from ._mcp_config import McpServer, check_server_name  # not imported by agents without MCP servers

        self._need_exec("MCP servers are")
        check_server_name(name)
        if not isinstance(server, McpServer):
            raise ConfigError(f"MCP server {name!r} must be a ta.McpServer (McpServer.stdio(...) or .http(...))")
        if name in self._mcp:
            raise ConfigError(f"MCP server {name!r} is added twice; server names must be unique")
        from ._mcp_names import js_form

        same = [other for other in self._mcp if js_form(other) == js_form(name)]
        if same:  # the model writes both as one JavaScript name
            raise ConfigError(f"MCP server names {same[0]!r} and {name!r} are both tools.mcp__{js_form(name)}__... "
                              "in exec ('-' is written '_'); rename one of them")
        self._check_free(TOOL_SEARCH)
        self._mcp[name] = server
        return self

    def with_tool_search(self, *, defer_above: int) -> Tools:
        """MCP tools are callable directly while they fit in ``defer_above`` (default
        16); the others are deferred until ``tool_search`` finds them. Servers are
        taken in the order they were added, each active when its tools, with those of
        the active servers before it, fit -- the same tools every run, whatever order
        the servers come up in. ``defer_above=0`` always defers (as nanocodex does).
        Returns ``self``."""
        if isinstance(defer_above, bool) or not isinstance(defer_above, int) or defer_above < 0:
            raise ConfigError(f"defer_above must be a non-negative integer, got {defer_above!r}")
        self._defer_above = defer_above
        return self

    def with_blocking_warning(self, threshold: float | None) -> Tools:
        """Emit ``tool.blocked`` when an ``async`` user tool holds the event loop longer
        than ``threshold`` seconds in one step (between two awaits; default 0.1 s), once
        per call; ``None`` turns the check off. Returns ``self``. Unless set here, the
        check is off under a virtual clock (``trio.testing.MockClock``): the event is
        about wall time, and a deterministic test's events must not depend on how
        loaded the machine is."""
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold < 3600
        ):
            raise ConfigError(
                f"the blocking threshold must be a number of seconds in (0, 3600) or None, got {threshold!r}"
            )
        self._blocking_threshold = None if threshold is None else float(threshold)
        self._blocking_set = True
        return self

    @property
    def blocking_threshold(self) -> float | None:
        """Seconds one step of a user tool may hold the loop (``with_blocking_warning``)."""
        return self._blocking_threshold

    @property
    def blocking_threshold_set(self) -> bool:
        """Whether ``with_blocking_warning`` set the threshold (else the default applies,
        and not under a virtual clock)."""
        return self._blocking_set

    @property
    def web_search(self) -> bool:
        return self._builtins and self._web_search

    @property
    def image_generation(self) -> bool:
        return self._image_generation

    @property
    def mcp_servers(self) -> dict[str, McpServer]:
        return dict(self._mcp)

    @property
    def mcp_defer_above(self) -> int:
        return self._defer_above

    def builtin_nested(self) -> list[NestedTool]:
        """The nested built-ins ``exec`` offers with these options (none without built-ins)."""
        if not self._builtins:
            return []
        return builtin_nested_tools(
            web_search=self.web_search, image_generation=self._image_generation, tool_search=bool(self._mcp)
        )

    def reserved_names(self) -> frozenset[str]:
        """Names a user tool may not take: the enabled built-ins."""
        if not self._builtins:
            return BUILTIN_NAMES
        names = set(BUILTIN_NAMES | NESTED_BUILTINS)
        if self.web_search:
            names.add(WEB_SEARCH)
        if self._image_generation:
            names.add(IMAGE_GENERATION)
        if self._mcp:
            names.add(TOOL_SEARCH)
            names.update(MCP_RESOURCE_TOOLS)
        return frozenset(names)

    def _need_exec(self, what: str) -> None:
        if not self._builtins:
            raise ConfigError(f"{what} reached from exec; use ta.Tools.default() (Tools.empty() has no exec)")

    def _check_free(self, builtin: str) -> None:
        if builtin in self._user:
            raise ConfigError(f"the built-in tool {builtin!r} would collide with your tool of that name; rename yours")

    def _add(self, spec: ToolSpec) -> None:
        if not isinstance(spec.name, str) or not _tool_name().match(spec.name):
            raise ConfigError(
                f"tool name {spec.name!r} is invalid; use letters, digits and underscores "
                "(at most 64 characters, not starting with a digit)"
            )
        if spec.name in self.reserved_names():
            raise ConfigError(f"tool name {spec.name!r} is taken by a built-in tool; rename it")
        if self._builtins and spec.name.startswith("mcp__"):
            raise ConfigError(f"tool name {spec.name!r} starts with 'mcp__', which names MCP server tools; rename it")
        if spec.name in self._user:
            raise ConfigError(f"tool {spec.name!r} is registered twice; tool names must be unique")
        if not isinstance(spec.description, str):
            raise ConfigError(f"tool {spec.name!r}: description must be a string")
        if not callable(spec.handler):
            raise ConfigError(
                f"tool {spec.name!r}: handler must be a callable handler(ctx, args), got {type(spec.handler).__name__}"
            )
        from ._threaded import is_async_callable, threaded_handler

        if not is_async_callable(spec.handler):  # decided here, once, not at call time
            spec = attrs.evolve(spec, handler=threaded_handler(spec.handler))  # type: ignore[arg-type]
        self._user[spec.name] = spec

    def user_tool(self, name: str) -> ToolSpec | None:
        return self._user.get(name)

    @property
    def user_tools(self) -> tuple[ToolSpec, ...]:
        return tuple(self._user.values())

    def definitions(self, *, mcp_tools: Sequence[tuple[str, str | None]] = ()) -> list[dict[str, Any]]:
        """The ``additional_tools`` list: ``exec`` and ``wait`` first, then user tools.

        ``mcp_tools`` (``(name, description)`` of the MCP tools active now) are listed in
        ``exec``'s description. The agent's request prefix is built without them (the
        servers start with the agent); once some are active, requests that carry the
        tools carry a description listing them (``_runtime/_live_prefix.py`` says when)."""
        defs: list[dict[str, Any]] = []
        if self._builtins:
            nested = [*self.builtin_nested(), *(spec.nested() for spec in self._user.values())]
            mcp = [(name, server.description) for name, server in self._mcp.items()]
            defs.append(exec_definition(nested, web_search=self.web_search, mcp_servers=mcp, mcp_tools=mcp_tools))
            defs.append(wait_definition())
        defs.extend(spec.definition() for spec in self._user.values())
        defs.extend(self._groups.values())
        return defs

    def top_level_names(self) -> frozenset[str]:
        names = set(self._user)
        if self._builtins:
            names |= BUILTIN_NAMES
        return frozenset(names)


from ._decorator import ToolDecorator, tool  # noqa: E402 -- it names ToolSpec, defined above
