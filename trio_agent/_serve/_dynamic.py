"""Dynamic tools: function tools the client declares in ``thread/start`` (``dynamicTools``)
and runs itself. The model calls one like any function tool; the server sends the
thread's subscribers an ``item/tool/call`` request, and the first reply
(``DynamicToolCallResponse``) is the tool's output, so the turn goes on.

A call waits until its ``item/started`` is on the wire (``DynamicCalls.introduced``),
so a client always sees the item before the request. If no client is subscribed when
the call starts, or every client it was sent to goes away, or a client answers with an
error or a malformed result, the call fails (``success: false``) with a text saying
why, and the model gets that text. Cancelling the turn abandons the request: each
client that had it gets ``serverRequest/resolved``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from .._runtime import Agent
from .._tools import Tools
from .._tools._context import ToolContext
from ._jsonrpc import InvalidParams
from ._outs import DynamicOutcome
from ._params import shown

__all__ = ["DynamicCalls", "DynamicToolSpec", "Introductions", "build_tools", "parse_dynamic_tools", "parse_reply"]

Json = dict[str, Any]


@attrs.frozen
class DynamicToolSpec:
    name: str
    description: str
    input_schema: Json

    def to_json(self) -> Json:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


def parse_dynamic_tools(raw: list[Any] | None) -> list[DynamicToolSpec]:
    """``dynamicTools`` of ``thread/start``: function tools ``{name, description,
    inputSchema}`` (``"type": "function"`` optional); anything else is ``InvalidParams``."""
    specs: list[DynamicToolSpec] = []
    for index, entry in enumerate(raw or []):
        where = f"thread/start: dynamicTools[{index}]"
        if not isinstance(entry, dict):
            raise InvalidParams(f"{where} must be an object {{name, description, inputSchema}}, got {shown(entry)}")
        kind = entry.get("type", "function")
        if kind != "function" or entry.get("namespace") is not None:
            raise InvalidParams(f"{where}: only function tools are supported (no namespaces), got type {shown(kind)}")
        name, description = entry.get("name"), entry.get("description", "")
        schema = entry.get("inputSchema", entry.get("input_schema", {"type": "object", "properties": {}}))
        if not isinstance(name, str) or not name:
            raise InvalidParams(f"{where}: `name` must be a non-empty string, got {shown(name)}")
        if not isinstance(description, str):
            raise InvalidParams(f"{where}: `description` must be a string, got {shown(description)}")
        if not isinstance(schema, dict):
            raise InvalidParams(f"{where}: `inputSchema` must be a JSON Schema object, got {shown(schema)}")
        if any(spec.name == name for spec in specs):
            raise InvalidParams(f"{where}: the tool name {name!r} is declared twice")
        specs.append(DynamicToolSpec(name, description, schema))
    return specs


Ask = Callable[[str, Any, str], Awaitable[DynamicOutcome]]  # (call id, arguments, tool) -> outcome


def build_tools(specs: list[DynamicToolSpec], ask: Ask, *,
                collaboration: Callable[[Agent], Awaitable[None]] | None = None, web_search: bool = True) -> Tools:
    """The built-in tools (without ``web__run`` unless ``web_search``) plus one function
    tool per spec, each answered by ``ask``; with ``collaboration`` (a worker watcher)
    the multi-agent tools too. Raises ``ConfigError`` for a name or schema the runtime
    refuses."""
    tools = Tools.default() if web_search else Tools.default().without_web_search()
    if collaboration is not None:
        tools.with_collaboration(watch=collaboration)
    for spec in specs:
        tools.function(spec.name, spec.description, spec.input_schema, _handler(spec.name, ask))
    return tools


def _handler(name: str, ask: Ask) -> Callable[[ToolContext, Any], Awaitable[Any]]:
    async def run(ctx: ToolContext, arguments: Any) -> Any:
        outcome = await ask(ctx.call_id, arguments, name)
        return model_output(outcome)

    return run


def model_output(outcome: DynamicOutcome) -> str | list[Json]:
    """What the model sees: the content items as Responses input items."""
    parts: list[Json] = []
    for item in outcome.content_items:
        if item.get("type") == "inputText":
            parts.append({"type": "input_text", "text": str(item.get("text", ""))})
        elif item.get("type") == "inputImage":
            parts.append({"type": "input_image", "image_url": str(item.get("imageUrl", ""))})
        else:
            parts.append({"type": "input_text", "text": f"[{item.get('type')} output omitted: not supported]"})
    return parts or ""


def parse_reply(result: object) -> DynamicOutcome:
    """A client's ``DynamicToolCallResponse``, or a failure saying what was wrong with it."""
    if isinstance(result, dict) and isinstance(result.get("success"), bool):
        items = result.get("contentItems", [])
        if isinstance(items, list) and all(_content_item(item) for item in items):
            return DynamicOutcome(tuple(dict(item) for item in items), result["success"])
    return failure(
        "the client's reply to item/tool/call is not a DynamicToolCallResponse "
        f"{{contentItems: [{{type: inputText, text}} | {{type: inputImage, imageUrl}}], success}}: {shown(result)}"
    )


def _content_item(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    return (kind == "inputText" and isinstance(item.get("text"), str)) or (
        kind == "inputImage" and isinstance(item.get("imageUrl"), str)) or (
        kind == "inputAudio" and isinstance(item.get("audioUrl"), str))


def failure(text: str) -> DynamicOutcome:
    return DynamicOutcome(({"type": "inputText", "text": text},), False)


class Introductions:
    """Things (tool calls, approvals) whose server request must wait until the pump has
    mapped the event that introduces them -- their item started on the wire -- and the
    wire id of the turn each belongs to."""

    def __init__(self) -> None:
        self._introduced: dict[str, trio.Event] = {}
        self.turn_of: dict[str, str] = {}

    def introduce(self, key: str, turn_id: str) -> None:
        self.turn_of[key] = turn_id
        self._introduced.setdefault(key, trio.Event()).set()

    async def wait_introduced(self, key: str) -> str:
        """The wire turn id of ``key``, once it was introduced."""
        await self._introduced.setdefault(key, trio.Event()).wait()
        return self.turn_of.get(key, "")

    def forget(self, key: str) -> None:
        """Nothing refers to ``key`` any more (its item is complete)."""
        self._introduced.pop(key, None)
        self.turn_of.pop(key, None)


class DynamicCalls(Introductions):
    """One thread's dynamic calls: when each was introduced (its ``item/started`` sent,
    and in which turn) and how each ended."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, DynamicOutcome] = {}

    def outcome(self, call_id: str) -> DynamicOutcome | None:
        return self.outcomes.get(call_id)

    def forget(self, call_id: str) -> None:
        super().forget(call_id)
        self.outcomes.pop(call_id, None)
