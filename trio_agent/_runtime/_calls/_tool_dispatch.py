"""Route tool calls: user handlers, the built-in ``exec``/``wait``, the namespaced groups.

``exec`` cells run in the agent's ``CodeModeHost`` (created on first use, so the
JavaScript engine is imported lazily); their ``tools.<name>(...)`` calls come back
through ``NestedCalls.call`` (``_nested_calls``: the shell, patches, the other nested
built-ins, MCP tools, user handlers). A typed tool's bad arguments
(``InvalidToolArguments``) and a built-in's failure (``NestedToolError``) are answered
as failed results, top-level and nested alike.

The dispatcher sees only a ``ToolEnvironment`` (``_tool_environment``: tools,
workspace, handle, emit, nursery, groups, and for the remote tools the config and a
view of history), never the agent. A cell may outlive the turn that started it (after
``yield_control()`` the turn can finish while the script runs on); once that turn's
terminal event is out (``turn_ended``), the cell's nested calls are *background*:
their events carry no ``turn_id`` and say ``"background": true``, so nothing is ever
reported under a turn after its terminal event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..._tools import InvalidToolArguments, ToolSpec
from ..._wire.portable import CODE_PARAMETER, INPUT_PARAMETER, call_of, string_argument
from ._mcp_direct_calls import direct_definitions, direct_runner, offer_direct_tools
from ._nested_calls import CellOrigin, NestedCalls
from ._tool_environment import ToolEnvironment, blocking_watch, describe, tool_context
from ._tool_runner import Runner, ToolOutcome, UnencodableValue, to_output

if TYPE_CHECKING:
    from ..._session.ledger import TurnLedger
    from ..._tools.code_mode import CodeModeHost
    from .._counters import TurnStats
    from .._turns._turn import TurnState

__all__ = ["ToolDispatcher"]
_CALL_KINDS = ("custom_tool_call", "function_call")
_OUTPUT_KINDS = ("custom_tool_call_output", "function_call_output")


class ToolDispatcher:
    def __init__(self, env: ToolEnvironment) -> None:
        self._env = env
        self._host: CodeModeHost | None = None
        self._origins: dict[str, CellOrigin] = {}  # exec call id -> origin
        self._function_execs: set[str] = set()  # exec call ids that came as function calls
        self._cell_calls: dict[int, str] = {}  # cell id -> exec call id
        self._closed = False
        self._nested = NestedCalls(env, self._origins)

    def start(self) -> None:
        """Start what runs beside the turns: the MCP servers, in the agent's nursery and
        in the background (nothing here waits for a server)."""
        self._nested.start()

    def active_mcp_tools(self) -> tuple[tuple[str, str], ...]:
        """The MCP tools callable now (``exec``'s description lists them: ``_live_prefix``)."""
        return self._nested.active_mcp_tools()

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
        if kind == "function_call" and name.startswith("mcp__"):  # a direct MCP tool (_mcp_direct_calls)
            return direct_runner(self._nested.mcp, name)
        return None

    def offer_direct_tools(self, ledger: TurnLedger) -> bool:
        """Put the direct MCP tools that are up now in ``ledger``'s prefix (at a turn's
        start); True when the prefix changed. Without MCP servers: nothing, one call."""
        mcp = self._nested.mcp
        return mcp is not None and offer_direct_tools(direct_definitions(mcp), ledger)

    # -- user tools --------------------------------------------------------------------

    def turn_ended(self, turn_id: int) -> None:
        """``turn_id``'s terminal event is out: its surviving cells run in the background."""
        for origin in self._origins.values():
            if origin.turn_id == turn_id:
                origin.turn_id = None
        if self._env.guard is not None:
            self._env.guard.turn_ended(turn_id)  # its pending approvals are withdrawn

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
            call_id = call.get("call_id", "")
            ctx = tool_context(self._env, spec, call_id, turn_id)
            try:
                with blocking_watch(self._env, spec, call_id, turn_id):
                    value = await spec.handler(ctx, arguments)
            except InvalidToolArguments as exc:  # checked before the tool's own code ran
                return ToolOutcome(f"invalid arguments for tool {spec.name}: {exc.message}", "failed")
            except Exception as exc:  # a failing tool is answered, not fatal
                return ToolOutcome(f"tool {spec.name} failed: {describe(exc)}", "failed")
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
            from ..._tools.code_mode import CodeModeHost

            # A resumed (or reloaded) agent numbers its cells after those its history
            # already ran, so no cell id the model saw before is handed out again.
            self._host = CodeModeHost(self._env.nursery, first_cell_id=_cells_run(self._env.history()) + 1)
        return self._host

    def _exec_runner(self, state: TurnState, model_call_index: int, stats: TurnStats) -> Runner:
        async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
            call_id = call.get("call_id", "")
            if call.get("type") == "function_call":
                arguments = string_argument(arguments, CODE_PARAMETER)
                if arguments is None:
                    return ToolOutcome('exec as a function takes a JSON object {"code": "<JavaScript source>"}; '
                                       "call it again with the source as the code string", "failed")
                self._function_execs.add(call_id)
            origin = CellOrigin(call_id, model_call_index, state.turn_id, stats)
            self._origins[call_id] = origin
            host = self._code_mode()
            with state.preemption.hook(_waker(host)):
                result = await host.exec(
                    call_id, str(arguments), self._nested.call, self._nested.tool_names(),
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
            from ..._tools.code_mode._output import format_failure
            from ..._tools.code_mode._wait_args import parse_wait_arguments

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

    async def aclose(self) -> None:
        """Stop every cell, shell session and MCP server the tools left running
        (idempotent). The MCP servers shut down concurrently, in the agent's nursery,
        whose exit waits for them."""
        self._closed = True
        self._nested.stop_servers()
        if self._host is not None:
            await self._host.aclose()
        await self._nested.aclose()


def _cells_run(history: Iterable[Mapping[str, Any]]) -> int:
    """How many ``exec`` cells the history ran (each answered ``exec`` call made one)."""
    calls = {item.get("call_id") for item in history if item.get("type") in _CALL_KINDS
             and item.get("name") == "exec"}
    answered = {item.get("call_id") for item in history if item.get("type") in _OUTPUT_KINDS}
    return len(calls & answered)


def _shown(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
