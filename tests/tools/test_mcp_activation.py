"""Which MCP servers' tools are active (``_mcp_ready.Activation``, issue 28 item 1):
decided in configuration order from each server's tool count, whatever order they
settle in; a server that failed or is past its startup deadline counts none. Pure
state, on Trio's mock clock."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

import trio_agent as ta
from trio_agent._tools._mcp_catalog import tool_entry
from trio_agent._tools._mcp_ready import Activation, ServerState


class _Tool:
    """What ``tool_entry`` reads of the SDK's ``Tool``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.title = None
        self.description = f"Tool {name}."
        self.input_schema: dict[str, Any] = {"type": "object"}
        self.output_schema = None


def _server(name: str, tools: int, timeout: float = 10.0) -> ServerState:
    server = ServerState(name, ta.McpServer.stdio("srv", startup_timeout=timeout))
    server.deadline = trio.current_time() + timeout
    server.entries = {f"t{i}": tool_entry(name, f"mcp__{name}__t{i}", _Tool(f"t{i}")) for i in range(tools)}
    return server


def _settle(server: ServerState, state: Any = "ready") -> None:
    server.state = state
    server.settled.set()


async def test_each_server_in_configuration_order_is_active_when_its_tools_fit_whatever_order_they_settle() -> None:
    for order in ([0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]):
        servers = [_server("big", 5), _server("small", 2), _server("bigger", 9), _server("tiny", 1)]
        activation = Activation(servers, budget=8)
        decided = []
        for index in order:
            _settle(servers[index])
            decided.append([activation.active(s) for s in servers])
        assert decided[-1] == [True, True, False, True]  # 5 + 2 fit, 9 does not, 1 still does
        # A server is decided only once it and every server before it have settled.
        first = order[0]
        assert decided[0] == [True if i == 0 and first == 0 else None for i in range(4)]


async def test_a_failed_server_counts_no_tools_and_a_late_one_is_decided_at_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    failed, late, after = _server("failed", 0), _server("late", 3, timeout=5.0), _server("after", 8)
    activation = Activation([failed, late, after], budget=8)
    _settle(failed, "failed")
    _settle(after)
    assert [activation.active(s) for s in (failed, late, after)] == [True, None, None]
    decided: list[bool] = []

    async def decide() -> None:
        decided.append(await activation.decide(after))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(decide)
        await trio.testing.wait_all_tasks_blocked()
        assert decided == []  # waiting for "late"
        await trio.sleep(5.0)  # its deadline passes: it counts none, so "after" fits
    assert decided == [True]
    assert late.late and late.problem() == "MCP server late did not start within 5 s"

