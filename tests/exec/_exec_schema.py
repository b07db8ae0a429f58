"""The exec JSONL events as ``@openai/codex-sdk`` 0.163.0 types them (``dist/index.d.ts``:
``ThreadEvent``, ``ThreadItem``, ``Usage``) and codex 0.171 prints them (the
``codex-sdks/ts-sdk*.jsonl`` transcripts): ``check_event`` fails on anything else."""

from __future__ import annotations

from typing import Any

import jsonschema

Json = dict[str, Any]

_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}


def _obj(required: dict[str, Any], **optional: Any) -> Json:
    return {"type": "object", "required": list(required), "properties": {**required, **optional}}


def _item(kind: str, **fields: Any) -> Json:
    return _obj({"id": {"type": "string", "pattern": "^item_[0-9]+$"}, "type": {"const": kind}, **fields})


_STATUS = {"enum": ["in_progress", "completed", "failed", "declined"]}
ITEM = {"oneOf": [
    _item("agent_message", text=_STR),
    _item("reasoning", text=_STR),
    _item("command_execution", command=_STR, aggregated_output=_STR,
          exit_code={"type": ["integer", "null"]}, status=_STATUS),
    _item("file_change", changes={"type": "array", "items": _obj(
        {"path": _STR, "kind": {"enum": ["add", "delete", "update"]}})},
          status={"enum": ["in_progress", "completed", "failed"]}),
    _item("mcp_tool_call", server=_STR, tool=_STR, arguments={},
          status={"enum": ["in_progress", "completed", "failed"]}),
    _item("web_search", query=_STR),
    _item("todo_list", items={"type": "array", "items": _obj({"text": _STR, "completed": {"type": "boolean"}})}),
    _item("error", message=_STR),
]}
USAGE = _obj({name: _INT for name in ("input_tokens", "cached_input_tokens", "cache_write_input_tokens",
                                       "output_tokens", "reasoning_output_tokens")})
EVENT = {"oneOf": [
    _obj({"type": {"const": "thread.started"}, "thread_id": _STR}),
    _obj({"type": {"const": "turn.started"}}),
    _obj({"type": {"const": "turn.completed"}, "usage": USAGE}),
    _obj({"type": {"const": "turn.failed"}, "error": _obj({"message": _STR})}),
    *(_obj({"type": {"const": kind}, "item": ITEM}) for kind in ("item.started", "item.updated", "item.completed")),
    _obj({"type": {"const": "error"}, "message": _STR}),
]}
_VALIDATOR = jsonschema.Draft7Validator(EVENT)


def check_event(event: Json) -> None:
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(event))
    if error is not None:
        raise AssertionError(f"not an exec event the SDK types: {error.message}: {event!r}")
