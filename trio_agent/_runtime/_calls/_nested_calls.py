"""The calls an ``exec`` cell's script makes: ``tools.<name>(...)``.

``NestedCalls.call`` runs ``exec_command``/``write_stdin`` in the agent's
``ShellSessions`` (made on first use), ``apply_patch`` in the workspace -- both through
the exec guard when the agent has one (sandbox, approvals) --, the other nested
built-ins (``update_plan``, ``view_image``, ``web__run``, ``image_gen__imagegen``,
``tool_search``), an MCP tool (``McpTools``, whose servers ``start()`` launches in the
agent's nursery), or a user handler. Each call is reported as ``tool.call``/
``tool.result`` with ``call_id`` ``<exec id>/code-<n>`` and the ``model_call_index``
of the model call that created the cell (SPEC sec. 7), under the cell's turn -- or,
once that turn has ended (``CellOrigin.turn_id`` is None), with no ``turn_id`` and
``"background": true``. A failed call rejects the script's promise
(``ToolCallError``): a built-in's ``NestedToolError``, a shell or patch error, a typed
tool's bad arguments, a user tool's exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..._events import EventKind
from ..._tools import InvalidToolArguments, NestedToolError
from ..._units import ns
from ._tool_environment import ToolEnvironment, blocking_watch, describe, tool_context
from ._tool_runner import UnencodableValue, json_text

if TYPE_CHECKING:
    from ..._tools._mcp import McpTools
    from ..._tools._remote import RemoteApi
    from ..._tools.exec_command import ShellSessions
    from .._counters import TurnStats

__all__ = ["CellOrigin", "NestedCalls"]


class CellOrigin:
    """Where a cell came from: its exec call id, model call index and turn stats."""

    def __init__(self, call_id: str, model_call_index: int, turn_id: int, stats: TurnStats) -> None:
        self.call_id = call_id
        self.model_call_index = model_call_index
        self.turn_id: int | None = turn_id  # None once that turn has ended: background
        self.stats = stats
        self.started = trio.current_time()


class NestedCalls:
    """The nested calls of one agent's cells (see the module docstring). ``origins``
    is the dispatcher's map of running cells (exec call id -> ``CellOrigin``)."""

    def __init__(self, env: ToolEnvironment, origins: Mapping[str, CellOrigin]) -> None:
        self._env = env
        self._origins = origins
        self._shell: ShellSessions | None = None
        self._builtins = {t.name: t for t in env.tools.builtin_nested()}  # the nested built-ins, by name
        self._mcp: McpTools | None = None
        self._remote: RemoteApi | None = None

    def start(self) -> None:
        """Start the MCP servers, in the agent's nursery and in the background (nothing
        here waits for a server)."""
        servers = self._env.tools.mcp_servers
        if servers and self._mcp is None:
            from ..._tools._mcp import McpTools

            self._mcp = McpTools(
                servers, workspace=self._env.workspace, emit=self._env.emit,
                defer_above=self._env.tools.mcp_defer_above,
            )
            self._mcp.start(self._env.nursery)

    @property
    def mcp(self) -> McpTools | None:
        """The agent's MCP tools (None before ``start``, or without servers)."""
        return self._mcp

    def tool_names(self) -> list[tuple[str, str, bool]]:
        """``(name, description, is a function)`` of every tool a cell can call now."""
        names = [(t.name, _first_sentence(t.description), t.is_function) for t in self._builtins.values()]
        names.extend((s.name, s.description, s.kind == "function") for s in self._env.tools.user_tools)
        if self._mcp is not None:
            names.extend(self._mcp.active_tools())
        return names

    def active_mcp_tools(self) -> tuple[tuple[str, str], ...]:
        """``(name, description)`` of the MCP tools callable now, in listing order."""
        if self._mcp is None:
            return ()
        return tuple((name, description) for name, description, _ in self._mcp.active_tools())

    def stop_servers(self) -> None:
        """Shut the MCP servers down, concurrently, in the agent's nursery (whose exit
        waits for them)."""
        if self._mcp is not None:
            self._mcp.close()

    async def aclose(self) -> None:
        """Stop the shell sessions and the remote tools' client (idempotent)."""
        if self._shell is not None:
            await self._shell.aclose()
        if self._remote is not None:
            await self._remote.aclose()

    # -- one call ------------------------------------------------------------------------

    async def call(self, name: str, args: Any, nested_call_id: str) -> Any:
        """Run ``tools.<name>(args)`` of a cell and report it (the module docstring)."""
        from ..._tools.code_mode import ToolCallError

        exec_call_id = nested_call_id.split("/code-", 1)[0]
        origin = self._origins.get(exec_call_id)
        call: dict[str, Any] = {"call_id": nested_call_id, "tool": name, "arguments": args,
                                "model_call_index": origin.model_call_index if origin else None}
        server_tool = self._mcp.origin(name) if self._mcp is not None and self._mcp.knows(name) else None
        if server_tool is not None:  # what an app-server client shows of an MCP call
            call["mcp_server"], call["mcp_tool"] = server_tool
        self._emit(EventKind.TOOL_CALL, call, origin)
        start = trio.current_time()
        started_after = ns(start - origin.started) if origin else 0
        status, error = "completed", None
        try:
            value = await self._run(name, args, nested_call_id, origin)
        except ToolCallError as exc:
            status, error, value = "failed", exc, exc.message
        except trio.Cancelled:
            # Pair the call with a result event even when its cell is stopped.
            elapsed = trio.current_time() - start
            self._emit(
                EventKind.TOOL_RESULT,
                {"call_id": nested_call_id, "tool": name, "status": "cancelled", "duration_ns": ns(elapsed),
                 "started_after_ns": started_after, "result": f"Wall time: {elapsed:.3f} seconds\naborted by user"},
                origin,
            )
            raise
        duration = ns(trio.current_time() - start)
        if origin is not None and origin.turn_id is not None:
            origin.stats.tool_calls += 1
            origin.stats.tool_work_duration_ns += duration
        self._emit(
            EventKind.TOOL_RESULT,
            {"call_id": nested_call_id, "tool": name, "status": status, "duration_ns": duration,
             "started_after_ns": started_after, "result": self._event_result(name, value)},
            origin,
        )
        if error is not None:
            raise error
        return value

    def _emit(self, kind: EventKind, payload: dict[str, Any], origin: CellOrigin | None) -> None:
        turn_id = origin.turn_id if origin is not None else None
        if turn_id is None:
            payload["background"] = True  # its turn already ended (or it never had one)
        self._env.emit(kind, payload, turn_id)

    def _output_progress(self, name: str, call_id: str, origin: CellOrigin | None) -> Callable[[str], None]:
        """A shell call's output as it arrives: ``tool.progress`` with ``stream: "output"``."""

        def emit(text: str) -> None:
            self._emit(
                EventKind.TOOL_PROGRESS, {"call_id": call_id, "tool": name, "message": text, "stream": "output"},
                origin,
            )

        return emit

    def _mcp_progress(self, call_id: str, origin: CellOrigin | None) -> Callable[[dict[str, Any]], None]:
        """An MCP server's progress on this call: ``mcp.progress`` (``_tools._mcp_notify``)."""

        def emit(payload: dict[str, Any]) -> None:
            self._emit(EventKind.MCP_PROGRESS, {"call_id": call_id, **payload}, origin)

        return emit

    def _event_result(self, name: str, value: Any) -> str | list[Any]:
        """A nested result as the ``tool.result`` event shows it: text or content items
        (an MCP ``CallToolResult`` as its text and image items), else compact JSON."""
        if isinstance(value, str | list):
            return value
        if self._mcp is not None and self._mcp.knows(name) and isinstance(value, dict):
            from ..._tools._mcp_catalog import content_items

            return content_items(value)
        return json_text(value)

    async def _run(self, name: str, args: Any, call_id: str, origin: CellOrigin | None) -> Any:
        from ..._tools.apply_patch import PatchError, apply_patch
        from ..._tools.code_mode import ToolCallError
        from ..._tools.exec_command import ShellError

        guard = self._env.guard
        turn_id = origin.turn_id if origin is not None else None  # None: a background cell's call
        try:
            if name == "exec_command":
                on_output = self._output_progress(name, call_id, origin)
                if guard is not None:
                    return await guard.exec_command(self._shell_sessions(), args, call_id, turn_id,
                                                    on_output=on_output)
                return await self._shell_sessions().exec_command(args, on_output=on_output)
            if name == "write_stdin":
                return await self._shell_sessions().write_stdin(
                    args, on_output=self._output_progress(name, call_id, origin))
            if name == "apply_patch":
                if guard is not None:
                    return await guard.apply_patch(str(args), self._env.workspace, call_id, turn_id)
                return await apply_patch(str(args), self._env.workspace)
            if name in self._builtins or (self._mcp is not None and self._mcp.knows(name)):
                return await self._run_builtin(name, args, call_id, origin)
        except (ShellError, PatchError) as exc:
            raise ToolCallError(str(exc)) from exc
        except NestedToolError as exc:
            raise ToolCallError(exc.message) from None
        spec = self._env.tools.user_tool(name)
        if spec is None:
            raise ToolCallError(f"unsupported nested tool call: {name}")
        try:
            with blocking_watch(self._env, spec, call_id, turn_id):
                value = await spec.handler(tool_context(self._env, spec, call_id, turn_id), args)
        except InvalidToolArguments as exc:
            raise ToolCallError(f"invalid arguments for tool {name}: {exc.message}") from None
        except Exception as exc:  # a failing user tool rejects the JS promise
            raise ToolCallError(f"tool {name} failed: {describe(exc)}") from exc
        try:
            json_text(value)  # what cannot reach the script as JSON rejects its promise
        except UnencodableValue as exc:
            raise ToolCallError(f"tool {name} returned {exc}") from None
        return value

    async def _run_builtin(self, name: str, args: Any, call_id: str, origin: CellOrigin | None) -> Any:
        """The nested built-ins beyond the shell (``NestedToolError`` for a failed call)."""
        from ..._tools import _definitions as defs

        env = self._env
        if name == "update_plan":
            from ..._tools._plan import PLAN_UPDATED, update_plan_arguments

            explanation, plan = update_plan_arguments(args)
            await trio.lowlevel.checkpoint()
            self._emit(EventKind.PLAN_UPDATED, {"call_id": call_id, "explanation": explanation, "plan": plan}, origin)
            return PLAN_UPDATED
        if name == "view_image":
            from ..._tools._view_image import view_image

            return await view_image(env.workspace, args)
        if name == defs.WEB_SEARCH:
            from ..._tools._web_search import run_web_search

            return await run_web_search(self._remote_api(), args, list(env.history()))
        if name == defs.IMAGE_GENERATION:
            from ..._tools._image_gen import run_image_generation

            return await run_image_generation(self._remote_api(), args, env.workspace, list(env.history()), call_id)
        if self._mcp is None:
            raise NestedToolError("the MCP servers are not running (the agent has not started them)")
        if name == defs.TOOL_SEARCH:
            return await self._mcp.search(args)
        from ..._tools._mcp_resources import RESOURCE_TOOLS

        if name in RESOURCE_TOOLS:
            return await self._mcp.resource_call(name, args)
        return await self._mcp.call(name, args, on_progress=self._mcp_progress(call_id, origin))

    # -- what the calls run in -----------------------------------------------------------

    def _shell_sessions(self) -> ShellSessions:
        if self._shell is None:
            from ..._tools.exec_command import ShellSessions

            guard = self._env.guard
            sandbox = guard.confinement if guard is not None else None
            self._shell = ShellSessions(self._env.nursery, self._env.workspace, sandbox=sandbox,
                                        on_warning=self._shell_warning)
        return self._shell

    def _shell_warning(self, message: str) -> None:
        """The login shell's environment could not be taken (``_tools._login_env``)."""
        self._env.emit(EventKind.API_WARNING, {"code": "shell_login_environment", "message": message}, None)

    def _remote_api(self) -> RemoteApi:
        if self._remote is None:
            from ..._tools._remote import RemoteApi

            if self._env.config is None:
                raise NestedToolError("remote tools need the agent's configuration, which this host lacks")
            self._remote = RemoteApi(self._env.config)
        return self._remote


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + dot.strip() if dot else text
