"""Request bodies for servers other than OpenAI's (``Profile.GENERIC``; pure).

OpenAI's dialect (``request.build_response_create``) carries the tools inside the
private ``additional_tools`` input item and several private or OpenAI-only fields.
Third-party Responses servers (LiteLLM, vLLM, Ollama, llama-stack, Responses-to-Chat
bridges) understand the public shape only, so here:

- the tools travel as top-level ``tools`` on every request, chained ones included, and
  the instructions as top-level ``instructions`` (a bridge may drop developer messages);
- tools are plain function tools: a custom tool (``exec``, a user's custom tool) becomes
  a function taking one string (``exec``: ``{"code": ...}``, others ``{"input": ...}``),
  and the tools of a namespace group become functions named ``<namespace>__<tool>``
  (``call_of`` maps such calls back);
- no ``include``, ``reasoning``, ``prompt_cache_key``, ``text.verbosity``,
  ``client_metadata`` or ``generate``: ``reasoning`` (with ``include`` of the encrypted
  reasoning, so that a stateless conversation keeps it) only when a thinking level is
  asked for, ``text.format`` only for a structured turn;
- a field a server refused by name (``drop``) is left out of later requests.

The input is what the OpenAI dialect sends, minus the ``additional_tools`` item and the
instructions message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .request import wire_item

if TYPE_CHECKING:
    from .request import RequestSettings

__all__ = [
    "CODE_PARAMETER",
    "DROPPABLE_FIELDS",
    "INPUT_PARAMETER",
    "build_portable_create",
    "call_of",
    "named_fields",
    "portable_tools",
    "split_prefix",
    "string_argument",
]

CODE_PARAMETER = "code"  # exec as a function: {"code": "<JavaScript>"}
INPUT_PARAMETER = "input"  # any other custom tool as a function: {"input": "<text>"}
NAMESPACE_SEPARATOR = "__"

#: Optional fields a server may refuse by name, and the body key each one drops.
DROPPABLE_FIELDS: Mapping[str, str] = {
    "include": "include",
    "reasoning": "reasoning",
    "reasoning_effort": "reasoning",
    "reasoning.effort": "reasoning",
    "parallel_tool_calls": "parallel_tool_calls",
    "service_tier": "service_tier",
    "tool_choice": "tool_choice",
}
_FIELD_PATTERN = "|".join(sorted((re.escape(name) for name in DROPPABLE_FIELDS), key=len, reverse=True))


def split_prefix(
    prefix: Sequence[dict[str, Any]], instructions_id: str
) -> tuple[list[dict[str, Any]], str | None, list[dict[str, Any]]]:
    """``(tool definitions, instructions, the other prefix items)``: the
    ``additional_tools`` item's tools and the text of the instructions message (the one
    whose id is ``instructions_id``) come out of the input, to travel as top-level
    ``tools`` and ``instructions`` -- some bridges drop developer messages."""
    definitions: list[dict[str, Any]] = []
    instructions: str | None = None
    rest: list[dict[str, Any]] = []
    for item in prefix:
        if item.get("type") == "additional_tools":
            definitions.extend(tool for tool in item.get("tools", ()) if isinstance(tool, dict))
        elif item.get("id") == instructions_id and instructions is None:
            parts = item.get("content", ())
            instructions = "".join(part.get("text", "") for part in parts if isinstance(part, dict))
        else:
            rest.append(item)
    return definitions, instructions, rest


def _string_function(definition: Mapping[str, Any], parameter: str, what: str) -> dict[str, Any]:
    name = definition.get("name", "")
    description = str(definition.get("description") or "")
    note = f"Pass {what} as the `{parameter}` argument, exactly as it would be written."
    return {
        "type": "function",
        "name": name,
        "description": f"{description}\n\n{note}" if description else note,
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {parameter: {"type": "string", "description": what[0].upper() + what[1:] + "."}},
            "required": [parameter],
            "additionalProperties": False,
        },
    }


def portable_tools(definitions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The definitions as function tools (see the module docstring); others unchanged."""
    tools: list[dict[str, Any]] = []
    for definition in definitions:
        kind = definition.get("type")
        if kind == "custom":
            if definition.get("name") == "exec":
                tools.append(_string_function(definition, CODE_PARAMETER, "the JavaScript source to run"))
            else:
                tools.append(_string_function(definition, INPUT_PARAMETER, "the tool's input text"))
        elif kind == "namespace":
            group = str(definition.get("name", ""))
            for inner in definition.get("tools", ()):
                if isinstance(inner, Mapping):
                    tool = dict(inner)
                    tool["name"] = f"{group}{NAMESPACE_SEPARATOR}{inner.get('name', '')}"
                    tools.append(tool)
        else:
            tools.append(dict(definition))
    return tools


def call_of(call: dict[str, Any], groups: Iterable[str]) -> dict[str, Any]:
    """A ``function_call`` named ``<group>__<tool>`` for one of ``groups`` as the
    namespaced call it stands for (``namespace: group, name: tool``); others unchanged."""
    name = call.get("name")
    if call.get("type") != "function_call" or call.get("namespace") or not isinstance(name, str):
        return call
    group, separator, tool = name.partition(NAMESPACE_SEPARATOR)
    if separator and tool and group in groups:
        return {**call, "namespace": group, "name": tool}
    return call


def string_argument(arguments: Any, parameter: str) -> str | None:
    """A custom tool's input from the function form's arguments (``{parameter: text}``,
    already decoded), or None when they are not that. A bare string is taken as is: a
    bridge may pass the text through undecoded."""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict):
        value = arguments.get(parameter)
        if isinstance(value, str) and set(arguments) <= {parameter}:
            return value
    return None


def named_fields(message: str, body: Mapping[str, Any]) -> frozenset[str]:
    """The body keys of the optional fields that ``message`` (a 400's text) names,
    among those ``body`` carries: what a retry may leave out."""
    named = set()
    for match in re.finditer(rf"(?<![A-Za-z0-9_.])({_FIELD_PATTERN})(?![A-Za-z0-9_])", message):
        key = DROPPABLE_FIELDS[match.group(1)]
        if key in body:
            named.add(key)
    return frozenset(named)


def build_portable_create(
    settings: RequestSettings,
    input_items: Iterable[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    instructions: str | None = None,
    previous_response_id: str | None = None,
    dropped: frozenset[str] = frozenset(),
    websocket: bool = False,
) -> dict[str, Any]:
    """The body of one request in the public dialect; a WebSocket frame starts with
    ``type: response.create``."""
    body: dict[str, Any] = {"type": "response.create"} if websocket else {}
    body["model"] = settings.model
    if instructions is not None:
        body["instructions"] = instructions
    if previous_response_id is not None:
        body["previous_response_id"] = previous_response_id
    wire = getattr(input_items, "wire", None)
    body["input"] = wire() if wire is not None else [wire_item(item) for item in input_items]
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
        body["parallel_tool_calls"] = False
    body["store"] = settings.store
    body["stream"] = True
    if settings.effort != "none":
        body["reasoning"] = {"effort": settings.effort}
        if not settings.store:
            body["include"] = ["reasoning.encrypted_content"]
    if settings.output_schema is not None:
        body["text"] = {"format": settings.output_schema.text_format()}
    if settings.fast_mode:
        body["service_tier"] = "priority"
    for key in dropped:
        body.pop(key, None)
    return body
