"""The built-in local scripted model behind ``trio-agent run --local`` (and ``serve
--local``).

Not a language model: a small deterministic script behind a plain trio-websocket
server on 127.0.0.1, so the CLI (and demos, and benchmarks) work with no API key:

- warmups (``generate: false``) are answered with ``response.completed``;
- a request chained on an earlier response of the same connection
  (``previous_response_id``) is read with the conversation that response ended (the
  last 16 are kept), as a real server reads it;
- a prompt starting with ``run:`` gets an ``exec`` call that runs the rest of the
  prompt as a shell command through ``tools.exec_command``;
- a tool output gets a final answer quoting it;
- anything else gets a short streamed answer echoing the prompt;
- a compaction request (input ending with ``compaction_trigger``) is answered like any
  prompt -- with text and no ``compaction`` item, as a server without remote compaction
  answers it, so the agent compacts locally -- unless the model was started with
  ``remote_compaction=True``: then it returns one ``compaction`` item (its
  ``encrypted_content`` a deterministic, readable stand-in);
- a summarization request (a local compaction: the last input is the runtime's
  summarization prompt) gets a short deterministic summary: the user's messages so far,
  quoted and counted;
- a final answer asked for in a JSON schema (``text.format`` of type ``json_schema``: an
  output schema) is the smallest instance of that schema, its strings the answer's text
  (``trio-agent exec --local --output-schema FILE`` prints JSON, as with a real model).

It lives outside ``trio_agent.testing`` so that ``--local`` starts without the test
kit (``FakeResponsesServer``, its HTTP side and request recording); the frames are
the same JSON the kit's ``testing._frames`` builds.
"""

from __future__ import annotations

import collections
import json
from functools import partial
from typing import Any

import trio
import trio_websocket

from ._session.summary import SUMMARIZATION_PROMPT, SUMMARY_PREFIX

__all__ = ["LocalModel", "serve_local_model"]

# What the runtime's own user-role messages start with (``_session.context``, ``.summary``).
_NOT_THE_USER = ("<environment_context>", "# AGENTS.md instructions for", "<turn_aborted>", SUMMARY_PREFIX,
                 SUMMARIZATION_PROMPT)

_PATH = "/v1/responses"
_REMEMBERED = 16  # conversations kept per connection, for chained requests
_USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 5},
    "output_tokens": 2,
    "output_tokens_details": {"reasoning_tokens": 1},
    "total_tokens": 12,
}


class LocalModel:
    """A running local model: ``url`` is the ``websocket_url`` for the agent."""

    __slots__ = ("url",)

    def __init__(self, url: str) -> None:
        self.url = url


async def serve_local_model(
    *, remote_compaction: bool = False, task_status: trio.TaskStatus[LocalModel] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve the scripted model on 127.0.0.1 until cancelled; reports the server.
    ``remote_compaction``: answer ``compaction_trigger`` with a ``compaction`` item."""
    serve = partial(trio_websocket.serve_websocket, partial(_handle, remote_compaction), "127.0.0.1", 0,
                    ssl_context=None, max_message_size=64 << 20)
    async with trio.open_nursery() as nursery:
        server: trio_websocket.WebSocketServer = await nursery.start(serve)
        task_status.started(LocalModel(f"ws://127.0.0.1:{server.port}{_PATH}"))


async def _handle(remote_compaction: bool, request: trio_websocket.WebSocketRequest) -> None:
    ws = await request.accept()
    try:
        await _serve_connection(ws, remote_compaction)
    except trio_websocket.ConnectionClosed:  # the client went away: this connection is done
        return


async def _serve_connection(ws: trio_websocket.WebSocketConnection, remote_compaction: bool) -> None:
    count = 0
    # The conversation each recent response ended, so that a request chained on one
    # (``previous_response_id``) is read in full, as a real server reads it (bounded).
    remembered: collections.OrderedDict[str, list[dict[str, Any]]] = collections.OrderedDict()
    while True:
        message = await ws.get_message()
        if not isinstance(message, str):
            continue
        request: dict[str, Any] = json.loads(message)
        count += 1
        response_id = f"resp-local-{count}"
        earlier = remembered.get(str(request.get("previous_response_id")), [])
        conversation = [*earlier, *(item for item in request.get("input") or [] if isinstance(item, dict))]
        if request.get("generate") is False:
            await _send(ws, {"type": "response.completed", "response": {"id": response_id, "usage": None}})
            output: list[dict[str, Any]] = []
        elif remote_compaction and conversation and conversation[-1].get("type") == "compaction_trigger":
            output = await _send_compaction(ws, conversation, response_id)
        else:
            output = await _answer(ws, request, conversation, response_id)
        remembered[response_id] = [*conversation, *output]
        while len(remembered) > _REMEMBERED:
            remembered.popitem(last=False)


async def _send(ws: trio_websocket.WebSocketConnection, frame: dict[str, Any]) -> None:
    await ws.send_message(json.dumps(frame, separators=(",", ":")))


def _completed(response_id: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "response.completed",
            "response": {"id": response_id, "status": "completed", "output": output, "usage": _USAGE}}


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content") or item.get("output") or ""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))


def _user_texts(conversation: list[dict[str, Any]]) -> list[str]:
    """The texts of the user messages that a person wrote: not the context messages, a
    compaction's summary or the summarization prompt (known by their starts)."""
    texts = []
    for item in conversation:
        if item.get("type") == "message" and item.get("role") == "user":
            text = _text_of(item).strip()
            if text and not text.startswith(_NOT_THE_USER):
                texts.append(text)
    return texts


def _summary(conversation: list[dict[str, Any]]) -> str:
    asked = _user_texts(conversation)
    quoted = "; ".join(repr(text if len(text) <= 200 else text[:200] + "...") for text in asked)
    return (f"Summary by trio_agent's local scripted model: the user sent {len(asked)} message(s)"
            + (f": {quoted}." if asked else ".") + " Each was answered; nothing is pending.")


async def _send_compaction(
    ws: trio_websocket.WebSocketConnection, conversation: list[dict[str, Any]], response_id: str
) -> list[dict[str, Any]]:
    item = {"id": f"cmp_{response_id}", "type": "compaction", "encrypted_content": "local:" + _summary(conversation)}
    await _send(ws, {"type": "response.created", "response": {"id": response_id}})
    await _send(ws, {"type": "response.output_item.done", "output_index": 0, "item": item})
    await _send(ws, _completed(response_id, [item]))
    return [item]


async def _answer(
    ws: trio_websocket.WebSocketConnection, request: dict[str, Any], conversation: list[dict[str, Any]],
    response_id: str,
) -> list[dict[str, Any]]:
    """Answer one request (see the module docstring); the response's output."""
    last = conversation[-1] if conversation else None
    await _send(ws, {"type": "response.created", "response": {"id": response_id}})
    if last is not None and last.get("type") == "message" and _text_of(last) == SUMMARIZATION_PROMPT:
        return await _stream_text(ws, response_id, _summary(conversation))
    if last is not None and last.get("type") in ("custom_tool_call_output", "function_call_output"):
        return await _stream_text(ws, response_id, _shaped(request, "The tool returned:\n" + _text_of(last).strip()))
    prompt = _text_of(last).strip() if last is not None else ""
    if prompt.startswith("run:"):
        command = prompt[len("run:"):].strip() or "ls"
        script = f"const r = await tools.exec_command({{cmd: {json.dumps(command)}}});\ntext(r.output);"
        call = {"id": "ctc_local_1", "type": "custom_tool_call", "call_id": "call-local-1", "name": "exec",
                "input": script}
        await _send(ws, {"type": "response.output_item.done", "output_index": 0, "item": call})
        await _send(ws, _completed(response_id, [call]))
        return [call]
    reply = (
        f"Hello from trio_agent's local scripted model. You said: {prompt!r}. "
        "Set OPENAI_API_KEY to talk to a real model, or try `run: ls` to see the exec tool."
    )
    return await _stream_text(ws, response_id, _shaped(request, reply))


def _shaped(request: dict[str, Any], text: str) -> str:
    """``text``, or the JSON text of the smallest instance of the request's output schema."""
    text_format = request.get("text")
    fmt = text_format.get("format") if isinstance(text_format, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        return text
    return json.dumps(_instance(fmt["schema"], text, 0))


def _instance(schema: object, text: str, depth: int) -> Any:
    """The smallest value ``schema`` admits (bounded: past 16 levels, or for a shape it
    cannot read, ``text``): an object of its required properties, an empty array, the
    first enum value or choice, a zero, false, or ``text`` for a string."""
    if not isinstance(schema, dict) or depth > 16:
        return text
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _instance(schema[key][0], text, depth + 1)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object":
        found = schema.get("properties")
        properties: dict[str, Any] = found if isinstance(found, dict) else {}
        required = [name for name in schema.get("required") or [] if isinstance(name, str)]
        return {name: _instance(properties.get(name), text, depth + 1) for name in required}
    simple: dict[object, Any] = {"array": [], "integer": 0, "number": 0, "boolean": False, "null": None}
    return simple.get(kind, text)


async def _stream_text(ws: trio_websocket.WebSocketConnection, response_id: str, text: str) -> list[dict[str, Any]]:
    message = {"id": f"msg_{response_id}", "type": "message", "role": "assistant", "status": "completed",
               "phase": "final_answer", "content": [{"type": "output_text", "text": text}]}
    added = {**message, "status": "in_progress", "content": []}
    await _send(ws, {"type": "response.output_item.added", "output_index": 0, "item": added})
    words = text.split(" ")
    for index, word in enumerate(words):
        delta = word if index == 0 else " " + word
        await _send(ws, {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": delta})
    await _send(ws, {"type": "response.output_item.done", "output_index": 0, "item": message})
    await _send(ws, _completed(response_id, [message]))
    return [message]
