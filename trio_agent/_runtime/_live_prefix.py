"""The request prefix as requests carry it: ``exec``'s description listing the active MCP tools.

The agent's request prefix (``additional_tools`` with the tool definitions, then the
instructions) is made once, when the agent opens (``_assembly``), and it is the
session's identity: the prompt-cache warmup, ``resume=`` and forks are checked against
it. MCP servers start with the agent, in the background, so that prefix cannot list
their tools. :class:`LivePrefix` gives ``RequestBodies`` the prefix with ``exec``'s
description listing the MCP tools active *now* (``Tools.definitions(mcp_tools=...)``,
bounded): the ledger's prefix while none is, that prefix with ``exec``'s definition
replaced -- built once per change of the active set or of the ledger's prefix (direct
MCP tools join it at a turn's start, ``_tools/_mcp_direct``) -- after that.

When a changed description reaches the model (a decision, written down here):

* ``Profile.OPENAI`` sends the tools in the ``additional_tools`` input item, which only
  a *full* request carries (the first of a session, any request after a compaction or
  a broken chain, or every request with ``History.FULL_REPLAY``, or HTTPS without
  ``store``). A chained request sends only new items, so the model keeps the
  description it has; re-sending the whole conversation to update a description would
  cost more than the list is worth (the model finds the same tools through
  ``tool_search`` and ``ALL_TOOLS``), so the updated description waits for the next
  full request.
* ``Profile.GENERIC`` sends the tools with every request: the next request carries the
  updated description (the server's prompt cache of the conversation is lost once per
  change -- servers come up once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._tools import Tools

__all__ = ["LivePrefix"]

Prefix = tuple[dict[str, Any], ...]


class LivePrefix:
    """``current()``: the prefix a request carries (see the module docstring)."""

    def __init__(
        self, tools: Tools, base: Callable[[], Prefix], active: Callable[[], Sequence[tuple[str, str]]],
    ) -> None:
        self._tools = tools
        self._base = base  # the ledger's prefix now (direct MCP tools join it: _mcp_direct)
        self._active = active
        self._for: tuple[Prefix, tuple[tuple[str, str], ...]] | None = None
        self._prefix: Prefix = ()

    def current(self) -> Prefix:
        base, active = self._base(), tuple(self._active())
        if self._for is None or self._for[0] is not base or self._for[1] != active:
            self._for = (base, active)
            self._prefix = _with_exec(base, self._tools.definitions(mcp_tools=active)) if active else base
        return self._prefix


def _with_exec(base: Prefix, definitions: Sequence[dict[str, Any]]) -> Prefix:
    """``base`` whose ``additional_tools`` item has ``definitions``' ``exec`` in place of
    its own (every other tool as ``base`` has it)."""
    exec_definition = next((d for d in definitions if d.get("name") == "exec"), None)
    if exec_definition is None:
        return base
    items = list(base)
    for index, item in enumerate(items):
        listed = item.get("tools")
        if item.get("type") == "additional_tools" and isinstance(listed, list):
            items[index] = {**item, "tools": [exec_definition if isinstance(t, dict) and t.get("name") == "exec"
                                              else t for t in listed]}
    return tuple(items)
