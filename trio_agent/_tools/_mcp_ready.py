"""When an MCP server's tools can be called, and which of them are active.

``ServerState`` is one server as the agent sees it: starting, ready, failed or
closed, with a *startup deadline* (when it started plus its ``startup_timeout``).
``until_started`` is how a call to a server that is still starting waits for it:
until it is ready or failed, or its deadline passes -- whichever comes first -- or the
caller is cancelled (the turn's cancel). Nothing waits before a turn: the servers
start in the background and only a call to one of them waits.

Activation. While the servers have at most ``defer_above`` tools in all, each tool
is *active* (listed in ``ALL_TOOLS``, callable by name); beyond that, tools are
*deferred* behind ``tool_search``. Which servers are active is decided from the
configuration, never from the order servers come up in: the servers are taken in
the order they were added (``Tools.with_mcp``), and each one is active when its tools
fit, with those of the active servers before it, within ``defer_above``; otherwise its
tools are deferred and the next server is tried (so a small server after a large one
can still be active). A server's count is the number of tools it offers
(after ``enabled_tools``/``disabled_tools`` and skipped entries); a server that failed
to start, or did not start by its deadline, counts none. A server's activation is
therefore known once it and every server before it have settled (``Activation.decide``
waits for that, each wait bounded by that server's deadline); it never changes after.
``tool_search`` activates the tools it finds, whatever their server's activation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import trio

from ._mcp_config import McpServer
from ._mcp_listing import ToolListing
from ._mcp_log import ServerLog
from ._mcp_session import Session

if TYPE_CHECKING:
    from mcp import Client

    from ._mcp_catalog import McpTool

__all__ = ["Activation", "ServerState"]


class ServerState:
    """One configured server: its state, session, log and tools."""

    def __init__(self, name: str, config: McpServer) -> None:
        self.name = name
        self.config = config
        self.state: Literal["starting", "ready", "failed", "closed"] = "starting"
        self.error: str | None = None
        self.client: Client | None = None
        self.scope = trio.CancelScope()
        self.deadline = math.inf  # set when it starts: when its startup_timeout runs out
        self.settled = trio.Event()  # ready, failed or closed
        self.calls: set[trio.CancelScope] = set()
        self.log = ServerLog()
        self.http_error: str | None = None  # the last HTTP error status the server answered
        self.listing = ToolListing()  # its tools/list entries, checked one by one
        self.entries: dict[str, McpTool] = {}  # its tools by name, in its listing order
        self.session = Session()  # how its connection ended, its restarts (_mcp_session)
        self.lost = trio.Event()  # set when the connection is lost (Session.drop)

    def lose(self, reason: str) -> None:
        self.session.drop(self, reason)

    @property
    def late(self) -> bool:
        """Still starting, past its startup deadline: it will not be ready."""
        return self.state == "starting" and trio.current_time() >= self.deadline

    def log_note(self) -> str:
        """What the server last said about itself: its log's tail, or an HTTP error."""
        if self.http_error is not None:
            return f" (the server answered HTTP {self.http_error})"
        tail = self.log.tail()
        return f"\n(server log, last lines:\n{tail})" if tail else ""

    def late_error(self) -> str:
        return f"MCP server {self.name} did not start within {self.config.startup_timeout:g} s{self.log_note()}"

    def problem(self) -> str | None:
        """Why its tools cannot be called now (None: they can, or it is starting)."""
        if self.late:
            return self.late_error()
        if self.state in ("failed", "closed"):
            return self.error or f"MCP server {self.name} is not running"
        return None

    def fail(self, error: str) -> None:
        if self.state in ("starting", "ready"):
            self.state = "failed"
            self.error = error
        self.client = None
        for scope in self.calls:
            scope.cancel()
        self.settled.set()

    async def until_started(self) -> None:
        """Wait until it is ready, failed or closed, or its startup deadline passes."""
        with trio.move_on_at(self.deadline):
            while self.state == "starting":
                await self.settled.wait()  # a restart replaces the event: read it again
                await trio.lowlevel.checkpoint()


class Activation:
    """Which servers' tools are active: see the module docstring."""

    def __init__(self, servers: Sequence[ServerState], budget: int) -> None:
        self._servers = list(servers)
        self._budget = budget
        self._used = 0
        self._active: dict[str, bool] = {}  # decided servers, in configuration order

    def update(self) -> None:
        """Decide every server whose turn has come (it and those before it settled)."""
        for server in self._servers[len(self._active):]:
            restarting = server.session.dropped or server.session.attempt > 0  # it was up: its tools stay listed
            if server.state == "starting" and not server.late and not restarting:
                return
            # a direct=True server's tools are offered to the model itself (_mcp_direct):
            # always active, and outside the budget of the tools exec lists
            up = server.state != "starting" or restarting
            count = len(server.entries) if up and not server.config.direct else 0
            fits = self._used + count <= self._budget
            self._used += count if fits else 0
            self._active[server.name] = fits

    def active(self, server: ServerState) -> bool | None:
        """Whether ``server``'s tools are active (None: not decided yet)."""
        if server.config.direct:
            return True
        self.update()
        return self._active.get(server.name)

    async def decide(self, server: ServerState) -> bool:
        """Whether ``server``'s tools are active, once that is decided: waits for the
        servers before it to settle (each wait bounded by that server's deadline)."""
        while (active := self.active(server)) is None:
            pending = self._servers[len(self._active)]
            await pending.until_started()
        return active
