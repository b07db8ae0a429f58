"""Route top-level tool calls to user handlers and the built-in ``exec``/``wait``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._events import EventKind
from .._tools import ToolContext, ToolSpec
from ._tool_runner import Runner, ToolOutcome, to_output

if TYPE_CHECKING:
    from ._agent import Agent
    from ._turn import TurnState

__all__ = ["ToolDispatcher"]


class ToolDispatcher:
    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    def runner_for(self, call: dict[str, Any], state: TurnState, model_call_index: int) -> Runner | None:
        """The coroutine function that answers ``call``, or None when it is unsupported."""
        if call.get("namespace"):
            return None
        name = call.get("name", "")
        tools = self._agent.tools
        spec = tools.user_tool(name)
        expected = "custom_tool_call" if spec is not None and spec.kind == "custom" else "function_call"
        if spec is not None and call.get("type") == expected:
            return self._user_runner(spec, state)
        return None

    def _user_runner(self, spec: ToolSpec, state: TurnState) -> Runner:
        agent = self._agent

        async def run(call: dict[str, Any], arguments: Any) -> ToolOutcome:
            call_id = call.get("call_id", "")
            if spec.kind == "function" and not isinstance(arguments, dict):
                return ToolOutcome(
                    f"invalid arguments for {spec.name}: expected a JSON object, got {arguments!r}", "failed"
                )

            def progress(message: str) -> None:
                agent.emit(
                    EventKind.TOOL_PROGRESS, {"call_id": call_id, "tool": spec.name, "message": message},
                    state.turn_id,
                )

            ctx = ToolContext(call_id, spec.name, agent.workspace, agent.handle, progress=progress)
            try:
                value = await spec.handler(ctx, arguments)
            except Exception as exc:  # a failing tool is answered, not fatal
                return ToolOutcome(f"tool {spec.name} failed: {type(exc).__name__}: {exc}", "failed")
            return ToolOutcome(to_output(value), "completed")

        return run

    async def aclose(self) -> None:
        """Stop everything the tools left running (cells, shell sessions)."""
