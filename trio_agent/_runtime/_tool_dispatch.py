"""Route tool calls: user handlers, the built-in ``exec``/``wait``, and nested calls.

``exec`` cells run in the agent's ``CodeModeHost`` (created on first use, so the
JavaScript engine is imported lazily); their ``tools.<name>(...)`` calls come back
through ``_call_nested``, which runs ``exec_command``/``write_stdin`` in the agent's
``ShellSessions``, ``apply_patch`` in the workspace, the other nested built-ins
(``update_plan``, ``view_image``, ``web__run``, ``image_gen__imagegen``,
``tool_search``), an MCP tool (``McpTools``, whose servers ``start()`` launches in the
agent's nursery), or a user handler, and reports each as ``tool.call``/``tool.result``
with ``call_id`` ``<exec id>/code-<n>`` and the ``model_call_index`` of the model call
that created the cell (SPEC sec. 7). A typed tool's bad arguments
(``InvalidToolArguments``) and a built-in's failure (``NestedToolError``) are answered
as failed results, top-level and nested alike.

The dispatcher sees only a ``ToolEnvironment`` (tools, workspace, handle, emit,
nursery, groups, and for the remote tools the config and a view of history), never
the agent. A cell may outlive the turn that started it (after
``yield_control()`` the turn can finish while the script runs on); once that turn's
terminal event is out (``turn_ended``), the cell's nested calls are *background*:
their events carry no ``turn_id`` and say ``"background": true``, so nothing is ever
reported under a turn after its terminal event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .._events import EventKind
from .._record import Record
from .._tools import InvalidToolArguments, NestedToolError, Tools, ToolSpec
from .._units import ns
from .._wire.portable import CODE_PARAMETER, INPUT_PARAMETER, call_of, string_argument
from ._tool_runner import Runner, ToolOutcome, UnencodableValue, json_text, to_output

if TYPE_CHECKING:
    from .._base.handle import AgentHandle
    from .._config import AgentConfig
    from .._tools._context import ToolContext
    from .._tools._mcp import McpTools
    from .._tools._remote import RemoteApi
    from .._tools.code_mode import CodeModeHost
    from .._tools.exec_command import ShellSessions
    from ._approval import ExecGuard
    from ._stats import TurnStats
    from ._turn import TurnState

__all__ = ["GroupRunners", "ToolDispatcher", "ToolEnvironment"]
_CALL_KINDS = ("custom_tool_call", "function_call")
_OUTPUT_KINDS = ("custom_tool_call_output", "function_call_output")
_SHELL_TOOLS = frozenset({"exec_command", "write_stdin", "apply_patch"})


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


class _CellOrigin:
    """Where a cell came from: its exec call id, model call index and turn stats."""

    def __init__(self, call_id: str, model_call_index: int, turn_id: int, stats: TurnStats) -> None:
        self.call_id = call_id
        self.model_call_index = model_call_index
        self.turn_id: int | None = turn_id  # None once that turn has ended: background
        self.stats = stats
        self.started = trio.current_time()


class ToolDispatcher:
    def __init__(self, env: ToolEnvironment) -> None:
        self._env = env
        self._host: CodeModeHost | None = None
        self._shell: ShellSessions | None = None
        self._origins: dict[str, _CellOrigin] = {}  # exec call id -> origin
        self._function_execs: set[str] = set()  # exec call ids that came as function calls
        self._cell_calls: dict[int, str] = {}  # cell id -> exec call id
        self._closed = False
        self._nested = {t.name: t for t in env.tools.builtin_nested()}  # the nested built-ins, by name
        self._mcp: McpTools | None = None
        self._remote: RemoteApi | None = None

    def start(self) -> None:
        """Start what runs beside the turns: the MCP servers, in the agent's nursery and
        in the background (nothing here waits for a server)."""
        servers = self._env.tools.mcp_servers
        if servers and self._mcp is None:
            from .._tools._mcp import McpTools

            self._mcp = McpTools(
                servers, workspace=self._env.workspace, emit=self._env.emit,
                defer_above=self._env.tools.mcp_defer_above,
            )
            self._mcp.start(self._env.nursery)

    # -- routing ---------------------------------------------------------------------

    def runner_for(
        self, call: dict[str, Any], state: TurnState, model_call_index: int, stats: TurnStats
    ) -> Runner | None:
        """The coroutine function that answers ``call``, or None when it is unsupported."""
        name, kind = call.get("name", ""), call.get("type")
        tools = self._env.tools
        spec = tools.user_tool(name)
        if spec is None and kind == "function_call" and self._env.groups:
            # Profile.GENERIC offers a group's tools as functions named <group>__<tool>.
            call = call_of(call, self._env.groups)
            name = call.get("name", "")
        namespace = call.get("namespace")
        if namespace:
            group = self._env.groups.get(namespace) if isinstance(namespace, str) else None
            if group is None or kind != "function_call" or not tools.has_group(namespace):
                return None
            return group(name, state)
        # ``exec`` and custom tools come as custom calls (OpenAI) or, offered as function
        # tools taking one string (Profile.GENERIC, or a bridge's choice), as function calls.
        if tools.has_builtins and name == "exec" and kind in _CALL_KINDS:
            return self._exec_runner(state, model_call_index, stats)
        if tools.has_builtins and name == "wait" and kind == "function_call":
            return self._wait_runner(state)
        if spec is not None and (kind == "function_call" or (kind == "custom_tool_call" and spec.kind == "custom")):
            return self._user_runner(spec, state.turn_id)
        return None

    # -- user tools --------------------------------------------------------------------

    def turn_ended(self, turn_id: int) -> None:
        """``turn_id``'s terminal event is out: its surviving cells run in the background."""
        for origin in self._origins.values():
            if origin.turn_id == turn_id:
                origin.turn_id = None
        if self._env.guard is not None:
            self._env.guard.turn_ended(turn_id)  # its pending approvals are withdrawn

    def _context(self, spec: ToolSpec, call_id: str, turn_id: int | None) -> ToolContext:
        from .._tools._context import ToolContext  # user tools only: the built-ins never take one

        env = self._env

        def progress(message: str) -> None:
            env.emit(
                EventKind.TOOL_PROGRESS, {"call_id": call_id, "tool": spec.name, "message": message}, turn_id
            )

        return ToolContext(call_id, spec.name, env.workspace, env.handle, progress=progress)

    def _user_runner(self, spec: ToolSpec, turn_id: int) -> Runner:
        async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
            if spec.kind == "custom" and call.get("type") == "function_call":
                arguments = string_argument(arguments, INPUT_PARAMETER)
                if arguments is None:
                    return ToolOutcome(f"invalid arguments for {spec.name}: expected a JSON object "
                                       f'{{"{INPUT_PARAMETER}": "<text>"}}', "failed")
            if spec.kind == "function" and not isinstance(arguments, dict):
                return ToolOutcome(
                    f"invalid arguments for {spec.name}: expected a JSON object, got {_shown(arguments)}", "failed"
                )
            ctx = self._context(spec, call.get("call_id", ""), turn_id)
            try:
                value = await spec.handler(ctx, arguments)
            except InvalidToolArguments as exc:  # checked before the tool's own code ran
                return ToolOutcome(f"invalid arguments for tool {spec.name}: {exc.message}", "failed")
            except Exception as exc:  # a failing tool is answered, not fatal
                return ToolOutcome(f"tool {spec.name} failed: {_describe(exc)}", "failed")
            try:
                return ToolOutcome(to_output(value), "completed")
            except UnencodableValue as exc:
                return ToolOutcome(f"tool {spec.name} returned {exc}", "failed")

        return run

    # -- exec / wait ---------------------------------------------------------------------

    def _code_mode(self) -> CodeModeHost:
        if self._closed:
            raise trio.ClosedResourceError("the agent is closing")
        if self._host is None:
            from .._tools.code_mode import CodeModeHost

            # A resumed (or reloaded) agent numbers its cells after those its history
            # already ran, so no cell id the model saw before is handed out again.
            self._host = CodeModeHost(self._env.nursery, first_cell_id=_cells_run(self._env.history()) + 1)
        return self._host

    def _shell_sessions(self) -> ShellSessions:
        if self._shell is None:
            from .._tools.exec_command import ShellSessions

            guard = self._env.guard
            sandbox = guard.confinement if guard is not None else None
            self._shell = ShellSessions(self._env.nursery, self._env.workspace, sandbox=sandbox,
                                        on_warning=self._shell_warning)
        return self._shell

    def _shell_warning(self, message: str) -> None:
        """The login shell's environment could not be taken (``_tools._login_env``)."""
        self._env.emit(EventKind.API_WARNING, {"code": "shell_login_environment", "message": message}, None)

    def _nested_tool_names(self) -> list[tuple[str, str, bool]]:
        names = [(t.name, _first_sentence(t.description), t.is_function) for t in self._nested.values()]
        names.extend((s.name, s.description, s.kind == "function") for s in self._env.tools.user_tools)
        if self._mcp is not None:
            names.extend(self._mcp.active_tools())
        return names

    def _exec_runner(self, state: TurnState, model_call_index: int, stats: TurnStats) -> Runner:
        async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
            call_id = call.get("call_id", "")
            if call.get("type") == "function_call":
                arguments = string_argument(arguments, CODE_PARAMETER)
                if arguments is None:
                    return ToolOutcome('exec as a function takes a JSON object {"code": "<JavaScript source>"}; '
                                       "call it again with the source as the code string", "failed")
                self._function_execs.add(call_id)
            origin = _CellOrigin(call_id, model_call_index, state.turn_id, stats)
            self._origins[call_id] = origin
            host = self._code_mode()
            with state.preemption.hook(_waker(host)):
                result = await host.exec(
                    call_id, str(arguments), self._call_nested, self._nested_tool_names(),
                    yield_now=lambda: state.preemption.pending,
                )
            if result.running:
                self._cell_calls[result.cell_id] = call_id
            else:
                self._origins.pop(call_id, None)  # the cell is over: nothing refers to it now
            return self._outcome(result, call_id, ended=not result.running)

        return run

    def _wait_runner(self, state: TurnState) -> Runner:
        async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
            from .._tools.code_mode._output import format_failure
            from .._tools.code_mode._wait_args import parse_wait_arguments

            args = parse_wait_arguments(arguments)
            if isinstance(args, str):
                return ToolOutcome(format_failure(args, 0.0), "failed")
            cell_id = args.cell_id
            host = self._code_mode()
            with state.preemption.hook(_waker(host)):
                result = await host.wait(
                    cell_id, args.yield_time_ms, terminate=args.terminate, max_tokens=args.max_tokens,
                    yield_now=lambda: state.preemption.pending,
                )
            exec_call_id = self._cell_calls.get(cell_id, "")
            if not result.running:
                self._cell_calls.pop(cell_id, None)
                self._origins.pop(exec_call_id, None)
            return self._outcome(result, exec_call_id, ended=not result.running)

        return run

    def _outcome(self, result: Any, exec_call_id: str, *, ended: bool) -> ToolOutcome:
        function = exec_call_id in self._function_execs
        if ended:
            self._function_execs.discard(exec_call_id)
        return _outcome(result, exec_call_id, function=function)

    # -- nested calls ------------------------------------------------------------------

    def _emit_nested(self, kind: EventKind, payload: dict[str, Any], origin: _CellOrigin | None) -> None:
        turn_id = origin.turn_id if origin is not None else None
        if turn_id is None:
            payload["background"] = True  # its turn already ended (or it never had one)
        self._env.emit(kind, payload, turn_id)

    def _output_progress(self, name: str, call_id: str, origin: _CellOrigin | None) -> Callable[[str], None]:
        """A shell call's output as it arrives: ``tool.progress`` with ``stream: "output"``."""

        def emit(text: str) -> None:
            self._emit_nested(
                EventKind.TOOL_PROGRESS, {"call_id": call_id, "tool": name, "message": text, "stream": "output"},
                origin,
            )

        return emit

    async def _call_nested(self, name: str, args: Any, nested_call_id: str) -> Any:
        from .._tools.code_mode import ToolCallError

        exec_call_id = nested_call_id.split("/code-", 1)[0]
        origin = self._origins.get(exec_call_id)
        call: dict[str, Any] = {"call_id": nested_call_id, "tool": name, "arguments": args,
                                "model_call_index": origin.model_call_index if origin else None}
        server_tool = self._mcp.origin(name) if self._mcp is not None and self._mcp.knows(name) else None
        if server_tool is not None:  # what an app-server client shows of an MCP call
            call["mcp_server"], call["mcp_tool"] = server_tool
        self._emit_nested(EventKind.TOOL_CALL, call, origin)
        start = trio.current_time()
        started_after = ns(start - origin.started) if origin else 0
        status, error = "completed", None
        try:
            value = await self._run_nested(name, args, nested_call_id, origin)
        except ToolCallError as exc:
            status, error, value = "failed", exc, exc.message
        except trio.Cancelled:
            # Pair the call with a result event even when its cell is stopped.
            elapsed = trio.current_time() - start
            self._emit_nested(
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
        self._emit_nested(
            EventKind.TOOL_RESULT,
            {"call_id": nested_call_id, "tool": name, "status": status, "duration_ns": duration,
             "started_after_ns": started_after, "result": self._event_result(name, value)},
            origin,
        )
        if error is not None:
            raise error
        return value

    def _event_result(self, name: str, value: Any) -> str | list[Any]:
        """A nested result as the ``tool.result`` event shows it: text or content items
        (an MCP ``CallToolResult`` as its text and image items), else compact JSON."""
        if isinstance(value, str | list):
            return value
        if self._mcp is not None and self._mcp.knows(name) and isinstance(value, dict):
            from .._tools._mcp_catalog import content_items

            return content_items(value)
        return json_text(value)

    async def _run_nested(self, name: str, args: Any, call_id: str, origin: _CellOrigin | None) -> Any:
        from .._tools.apply_patch import PatchError, apply_patch
        from .._tools.code_mode import ToolCallError
        from .._tools.exec_command import ShellError

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
            if name in self._nested or (self._mcp is not None and self._mcp.knows(name)):
                return await self._run_builtin(name, args, call_id, origin)
        except (ShellError, PatchError) as exc:
            raise ToolCallError(str(exc)) from exc
        except NestedToolError as exc:
            raise ToolCallError(exc.message) from None
        spec = self._env.tools.user_tool(name)
        if spec is None:
            raise ToolCallError(f"unsupported nested tool call: {name}")
        try:
            value = await spec.handler(self._context(spec, call_id, origin.turn_id if origin else None), args)
        except InvalidToolArguments as exc:
            raise ToolCallError(f"invalid arguments for tool {name}: {exc.message}") from None
        except Exception as exc:  # a failing user tool rejects the JS promise
            raise ToolCallError(f"tool {name} failed: {_describe(exc)}") from exc
        try:
            json_text(value)  # what cannot reach the script as JSON rejects its promise
        except UnencodableValue as exc:
            raise ToolCallError(f"tool {name} returned {exc}") from None
        return value

    async def _run_builtin(self, name: str, args: Any, call_id: str, origin: _CellOrigin | None) -> Any:
        """The nested built-ins beyond the shell (``NestedToolError`` for a failed call)."""
        from .._tools import _definitions as defs

        env = self._env
        if name == "update_plan":
            from .._tools._plan import PLAN_UPDATED, update_plan_arguments

            explanation, plan = update_plan_arguments(args)
            await trio.lowlevel.checkpoint()
            self._emit_nested(
                EventKind.PLAN_UPDATED, {"call_id": call_id, "explanation": explanation, "plan": plan}, origin
            )
            return PLAN_UPDATED
        if name == "view_image":
            from .._tools._view_image import view_image

            return await view_image(env.workspace, args)
        if name == defs.WEB_SEARCH:
            from .._tools._web_search import run_web_search

            return await run_web_search(self._remote_api(), args, list(env.history()))
        if name == defs.IMAGE_GENERATION:
            from .._tools._image_gen import run_image_generation

            return await run_image_generation(self._remote_api(), args, env.workspace, list(env.history()))
        if self._mcp is None:
            raise NestedToolError("the MCP servers are not running (the agent has not started them)")
        if name == defs.TOOL_SEARCH:
            return await self._mcp.search(args)
        return await self._mcp.call(name, args)

    def _remote_api(self) -> RemoteApi:
        if self._remote is None:
            from .._tools._remote import RemoteApi

            if self._env.config is None:
                raise NestedToolError("remote tools need the agent's configuration, which this host lacks")
            self._remote = RemoteApi(self._env.config)
        return self._remote

    async def aclose(self) -> None:
        """Stop every cell, shell session and MCP server the tools left running
        (idempotent). The MCP servers shut down concurrently, in the agent's nursery,
        whose exit waits for them."""
        self._closed = True
        if self._mcp is not None:
            self._mcp.close()
        if self._host is not None:
            await self._host.aclose()
        if self._shell is not None:
            await self._shell.aclose()
        if self._remote is not None:
            await self._remote.aclose()


def _cells_run(history: Iterable[Mapping[str, Any]]) -> int:
    """How many ``exec`` cells the history ran (each answered ``exec`` call made one)."""
    calls = {item.get("call_id") for item in history if item.get("type") in _CALL_KINDS
             and item.get("name") == "exec"}
    answered = {item.get("call_id") for item in history if item.get("type") in _OUTPUT_KINDS}
    return len(calls & answered)


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + dot.strip() if dot else text


def _shown(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(exc: BaseException) -> str:
    """``Type: message`` of a tool's exception, even when its ``str()`` itself fails."""
    try:
        message = str(exc)
    except Exception:
        message = "<the exception could not be turned into text>"
    return f"{type(exc).__name__}: {message}"[:2000]


def _waker(host: CodeModeHost) -> Callable[[], None]:
    """A preemption signal: a running ``exec``/``wait`` returns at its next look."""

    def wake() -> None:
        host.wake_observers()

    return wake


def _outcome(result: Any, exec_call_id: str, *, function: bool = False) -> ToolOutcome:
    """An ``exec``/``wait`` result; its notifications answer the exec call in the call's
    own form (``function: True``: it came as a function call)."""
    extra = tuple(
        {"type": "function_call_output", "call_id": exec_call_id, "output": note} if function
        else {"type": "custom_tool_call_output", "call_id": exec_call_id, "name": "exec", "output": note}
        for note in result.notifications
    )
    status = "failed" if result.status in ("failed", "terminated") else "completed"
    return ToolOutcome(result.output, status, extra)
