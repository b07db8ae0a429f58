"""The request prefix as requests carry it: ``exec``'s description listing the active MCP tools.

The agent's request prefix (``additional_tools`` with the tool definitions, then the
instructions) is made once, when the agent opens (``_assembly``), and it is the
session's identity: the prompt-cache warmup, ``resume=`` and forks are checked against
it. MCP servers start with the agent, in the background, so that prefix cannot list
their tools. :class:`LivePrefix` gives ``RequestBodies`` the prefix with ``exec``'s
description listing the MCP tools active *now* (``Tools.definitions(mcp_tools=...)``,
bounded): the agent's own prefix while none is, a new one -- built once per change of
the active set -- after that. The recorded prefix never changes.

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

from .._session.context import request_prefix
from .._tools import Tools

__all__ = ["LivePrefix"]

Prefix = tuple[dict[str, Any], ...]


class LivePrefix:
    """``current()``: the prefix a request carries (see the module docstring)."""

    def __init__(
        self, tools: Tools, instructions: str | None, base: Prefix,
        active: Callable[[], Sequence[tuple[str, str]]],
    ) -> None:
        self._tools = tools
        self._instructions = instructions
        self._base = base
        self._active = active
        self._for: tuple[tuple[str, str], ...] = ()
        self._prefix = base

    def current(self) -> Prefix:
        active = tuple(self._active())
        if active != self._for:
            self._for = active
            self._prefix = (
                request_prefix(self._tools.definitions(mcp_tools=active), self._instructions) if active else self._base
            )
        return self._prefix
