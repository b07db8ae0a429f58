"""``ToolContext``: what a user tool's handler is given with its arguments.

A module of its own so that its attrs class is built by the first typed tool
(``ta.tool``), the first read of ``trio_agent.ToolContext`` or the first call of a
user tool, not by ``import trio_agent``: the built-in tools never take one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from .._base.handle import AgentHandle

__all__ = ["ToolContext"]


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
