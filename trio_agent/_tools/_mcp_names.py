"""The names the model calls MCP tools by: stable, distinct, and routed to one tool only.

A server's tool ``t`` is ``mcp__<server>__<t>``, every character of ``t`` outside
``[A-Za-z0-9_-]`` made ``_`` (as nanocodex does). The model calls it from JavaScript,
where ``-`` becomes ``_`` too (``tools.mcp__files__read_file`` for ``read-file``), so
two names *collide* when their JavaScript forms are equal: ``get.time``,
``get-time`` and ``get_time`` would all be ``tools.mcp__x__get_time``.

Across servers no collision can happen, by the rule on server names
(``check_server_name``): letters and digits in runs joined by single ``-`` or ``_``
(so the JavaScript form of a name has no ``__`` and neither starts nor ends with
``_``), and no two servers of one agent with the same JavaScript form (``Tools``
checks that). Then ``mcp__<server>__`` is a distinct prefix for each server, and
the first ``__`` after ``mcp__`` ends the server's part of any name.

Within a server, ``tool_names`` resolves collisions from the set of names alone --
never from listing or start order, so a configuration gives the same names every run:

- of the tools whose names collide, one keeps the plain name: the one whose name is
  already a JavaScript identifier, else the one ``[A-Za-z0-9_-]`` leaves as it is,
  else the first in code-point order;
- every other one gets ``_`` and the first 8 hex digits of the SHA-256 of its own
  name appended (``get.time`` of server ``clock`` is ``mcp__clock__get_time_1d1114c3``);
- a name over 64 characters (the Responses API's limit for a function's name, so the
  same names can be offered as function tools) keeps its ``mcp__<server>__`` prefix and
  as much of the tool's part as fits before such a suffix.

Each tool not given its plain name is reported (``Renamed``) with why, for an
``api.warning``. The names are distinct by construction up to a clash of 32-bit
hashes, which takes a longer salted hash instead.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import attrs

from .._errors import ConfigError

__all__ = ["MAX_NAME", "Renamed", "check_server_name", "js_form", "server_part", "tool_names"]

MAX_NAME = 64
_MAX_SERVER = 48
_HASH = 8
# Compiled on first use, not at import (see _jsontext).
_SERVER_NAME = r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$"


@functools.cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


def check_server_name(name: object) -> str:
    """``name`` if it can name an MCP server, else a ``ConfigError`` saying what to do."""
    if isinstance(name, str) and 0 < len(name) <= _MAX_SERVER and _pattern(_SERVER_NAME).match(name):
        return name
    shown = f"{name!r:.80}" if isinstance(name, str) else f"of type {type(name).__name__}"
    hint = ""
    if isinstance(name, str) and name:
        fixed = re.sub(r"[-_]{2,}", "_", re.sub(r"[^A-Za-z0-9_-]", "_", name)).strip("-_")[:_MAX_SERVER]
        hint = f", e.g. {fixed!r}" if fixed and _pattern(_SERVER_NAME).match(fixed) else ""
    raise ConfigError(
        f"MCP server name {shown} is invalid: use 1-{_MAX_SERVER} letters and digits, single '-' or '_' "
        f"between them (no '__', and none at either end){hint}; its tools are called "
        "tools.mcp__<server>__<tool>, so the server's part must be unambiguous"
    )


def js_form(name: str) -> str:
    """The name as the model writes it in JavaScript (``ALL_TOOLS``): every character
    outside ``[A-Za-z0-9_$]`` made ``_`` (``_ts.js_identifier``)."""
    return _pattern(r"[^A-Za-z0-9_$]").sub("_", name)


def _plain(tool: str) -> str:
    return _pattern(r"[^A-Za-z0-9_-]").sub("_", tool)


def server_part(name: str) -> str | None:
    """The JavaScript form of the server part of an MCP tool's name (canonical or
    JavaScript), or None when ``name`` has no ``mcp__<server>__<tool>`` shape."""
    form = js_form(name)
    if not form.startswith("mcp__"):
        return None
    server, separator, tool = form[5:].partition("__")
    return server if separator and server and tool else None


@attrs.frozen
class Renamed:
    tool: str  # the server's own name for it
    name: str  # the name it was given
    plain: str  # the name it would have had
    reason: str


def _hashed(prefix: str, part: str, digest: str) -> str:
    """``prefix``, as much of ``part`` as fits and ``_<digest>``: at most ``MAX_NAME``
    characters, since a server's name (``_MAX_SERVER``) leaves room for the suffix."""
    return f"{prefix}{part[:MAX_NAME - len(prefix) - 1 - len(digest)]}_{digest}"


def _digest(tool: str, salt: int) -> str:
    import hashlib

    text = tool if salt == 0 else f"{tool}#{salt}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]


def tool_names(server: str, tools: Iterable[str]) -> tuple[dict[str, str], list[Renamed]]:
    """The name of each of one server's tools (distinct, non-empty names), and the
    tools not given their plain name, in code-point order of their names. The result
    depends on the set of names only (see the module docstring)."""
    prefix = f"mcp__{server}__"
    groups: dict[str, list[str]] = {}
    for tool in sorted(set(tools)):
        groups.setdefault(js_form(prefix + _plain(tool)), []).append(tool)
    names: dict[str, str] = {}
    taken: set[str] = set()
    later: list[tuple[str, str]] = []  # (tool, why it was not given its plain name)
    for members in groups.values():
        owner = min(members, key=lambda t: (js_form(t) != t, _plain(t) != t, t))
        for tool in members:
            plain = prefix + _plain(tool)
            if tool != owner:
                later.append((tool, f"its name maps to {js_form(plain)}, which tool {owner!r} has"))
            elif len(plain) > MAX_NAME:
                later.append((tool, f"its name would be {len(plain)} characters long, over {MAX_NAME}"))
            else:
                names[tool] = plain
                taken.add(js_form(plain))
    renamed = []
    for tool, reason in sorted(later):
        salt = 0
        while js_form(name := _hashed(prefix, _plain(tool), _digest(tool, salt))) in taken:
            salt += 1
        names[tool] = name
        taken.add(js_form(name))
        renamed.append(Renamed(tool, name, prefix + _plain(tool), reason))
    return names, renamed
