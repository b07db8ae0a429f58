"""``SessionSnapshot``: a committed conversation as JSON, and the checks for resuming it.

A snapshot holds what a new agent needs to continue a session (SPEC sec. 8): the
request prefix it was built with, the whole committed history (every item with its
client or server id), the lineage's prompt cache key and the workspace. It holds no
server response ids: a resumed agent's first request is a full replay. ``version`` is
1; ``from_json`` accepts any version so that ``resume`` can reject it with a clear
message. Pure: no I/O.

``request_prefix`` is the one builder of a conversation's shared prefix (SPEC sec. 2,
items 0-1), so that ``AgentConfig(resume=...)`` can check a snapshot against the
prefix the agent will send before any agent exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._errors import InvalidSessionSnapshot
from .._event_payloads._shared import JsonValue
from .._json_lines import MAX_DEPTH, LineProblem, json_kind, loads, too_deep
from .._jsontext import dumps

# request_prefix lives with the other prefix items, where an agent that never makes a
# snapshot finds it without importing this module.
from .context import DEFAULT_INSTRUCTIONS, request_prefix

__all__ = ["SNAPSHOT_VERSION", "SessionSnapshot", "check_prefix", "check_snapshot", "request_prefix"]

SNAPSHOT_VERSION = 1


@attrs.frozen
class SessionSnapshot:
    """A committed session; ``to_json()``/``from_json()`` round-trip it through JSON."""

    model: str
    lineage_id: str
    prompt_cache_key: str
    workspace: str
    request_prefix: list[dict[str, JsonValue]]
    history: list[dict[str, JsonValue]]
    version: int = SNAPSHOT_VERSION
    instructions: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The snapshot as JSON data: ``version`` first, then the fields in order; every
        dict and list in it is a new copy (changing it changes no history)."""
        data: dict[str, Any] = _copy_json(self._fields())
        return data

    def to_json_text(self) -> str:
        return dumps(self._fields())  # serialised as it is: no copy needed

    def _fields(self) -> dict[str, Any]:
        # By hand rather than through the converter: the history is already JSON data,
        # and unstructuring walks every value of it through cattrs' dispatch.
        return {
            "version": self.version,
            "model": self.model,
            "lineage_id": self.lineage_id,
            "prompt_cache_key": self.prompt_cache_key,
            "workspace": self.workspace,
            "request_prefix": self.request_prefix,
            "history": self.history,
            "instructions": self.instructions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | str | bytes) -> SessionSnapshot:
        """Parse a snapshot (``InvalidSessionSnapshot`` when it is not one)."""
        import cattrs  # only here: the converter is not needed to start or to run an agent

        from .._json import converter

        # cattrs reads the fields' types: resolved here, in this module (the class reports
        # ``trio_agent`` as its module, where the names are not all bound); once per class.
        attrs.resolve_types(cls, globalns=globals())
        try:
            raw = loads(data) if isinstance(data, str | bytes) else data
            if not isinstance(raw, dict):
                raise LineProblem(f"it is {json_kind(raw)}, not a JSON object")
            # The snapshot, its history, an item: the item itself may nest MAX_DEPTH levels.
            if too_deep(raw, MAX_DEPTH + 2):
                raise LineProblem(f"it nests arrays and objects deeper than {MAX_DEPTH} levels")
            snapshot: SessionSnapshot = converter.structure(raw, cls)
        except LineProblem as exc:
            problem = str(exc)
        except cattrs.BaseValidationError as exc:
            problem = "; ".join(cattrs.transform_error(exc, path="snapshot")[:3])
        except (ValueError, TypeError, KeyError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        else:
            return snapshot
        raise InvalidSessionSnapshot(
            f"this is not a trio_agent session snapshot ({problem}); pass what TurnResult.snapshot().to_json() produced"
        )


def _strip_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items without ids, and without the direct MCP tools (``mcp__*``) an agent adds
    to its tools once their server is up: a resumed agent starts its servers again."""
    return [
        {k: _without_direct(v) if k == "tools" and item.get("type") == "additional_tools" else v
         for k, v in item.items() if k != "id"}
        for item in items
    ]


def _without_direct(tools: Any) -> Any:
    if not isinstance(tools, list):
        return tools
    return [t for t in tools if not (isinstance(t, dict) and str(t.get("name", "")).startswith("mcp__"))]


def check_snapshot(snapshot: SessionSnapshot, *, explicit_cache_key: str | None) -> None:
    """The checks that need only the config (``InvalidSessionSnapshot``)."""
    if snapshot.version != SNAPSHOT_VERSION:
        raise InvalidSessionSnapshot(
            f"unsupported format version {snapshot.version}; expected {SNAPSHOT_VERSION} "
            "(the snapshot was written by another trio_agent version)"
        )
    if not snapshot.history:
        raise InvalidSessionSnapshot("the snapshot has no history to resume; start a new session instead")
    if explicit_cache_key is not None and explicit_cache_key != snapshot.prompt_cache_key:
        raise InvalidSessionSnapshot(
            f"the configured prompt cache key {explicit_cache_key!r} differs from the session's "
            f"{snapshot.prompt_cache_key!r}; omit prompt_cache_key to keep the session's"
        )
    _check_tool_pairs(snapshot.history)


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists and tuples copied; strings, numbers and None
    shared), as the converter's ``unstructure`` made it. Most values are leaves: they are
    tested inline rather than passed to a call each (a fifth of ``to_json()``'s time)."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _LEAVES else _copy_json(item) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _LEAVES else _copy_json(item) for item in value]
    if kind is tuple:
        return tuple([item if type(item) in _LEAVES else _copy_json(item) for item in value])
    return value


_LEAVES = frozenset((str, int, float, bool, type(None)))


def check_prefix(
    snapshot: SessionSnapshot, *, request_prefix: Sequence[dict[str, Any]], instructions: str | None,
    tools_known: bool = True,
) -> None:
    """The agent's instructions and tool definitions must be the session's own
    (``InvalidSessionSnapshot``). ``instructions=None`` is the built-in default. With
    ``tools_known=False`` (a ``tools_factory`` has not run yet) only the instructions
    are compared; the tool definitions are checked once the agent has built its tools."""
    instructions = instructions or DEFAULT_INSTRUCTIONS
    stored_prefix = snapshot.request_prefix
    if not tools_known:
        stored_prefix, request_prefix = stored_prefix[1:2], request_prefix[1:2]
    same_prefix = not stored_prefix or _strip_ids(stored_prefix) == _strip_ids(list(request_prefix))
    same_instructions = snapshot.instructions is None or snapshot.instructions == instructions
    if not (same_prefix and same_instructions):
        raise InvalidSessionSnapshot(
            "the instructions or tool definitions do not match the resumed session; "
            "resume with the same instructions and tools it was created with"
        )


def _check_tool_pairs(history: list[dict[str, Any]]) -> None:
    calls = {item.get("call_id") for item in history if item.get("type") in ("custom_tool_call", "function_call")}
    outputs = {
        item.get("call_id")
        for item in history
        if item.get("type") in ("custom_tool_call_output", "function_call_output")
    }
    if calls - outputs:
        raise InvalidSessionSnapshot(
            f"the snapshot has tool calls without outputs ({sorted(map(str, calls - outputs))}); "
            "it was not taken at a turn boundary"
        )
