"""The built-in local scripted model behind ``trio-agent run --local``.

Not a language model: a small deterministic script on top of
``FakeResponsesServer`` so the CLI (and demos, and benchmarks) work with no API key:

- warmups (``generate: false``) are answered with ``response.completed``;
- a prompt starting with ``run:`` gets an ``exec`` call that runs the rest of the
  prompt as a shell command through ``tools.exec_command``;
- a tool output gets a final answer quoting it;
- anything else gets a short streamed answer echoing the prompt.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from . import _frames as frames
from ._server import FakeConnection, FakeResponsesServer

__all__ = ["serve_local_model"]


async def serve_local_model(*, task_status: trio.TaskStatus[FakeResponsesServer] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the scripted model on 127.0.0.1 until cancelled; reports the server."""
    server = FakeResponsesServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        task_status.started(server)
        while True:
            conn = await server.accept()
            nursery.start_soon(_serve_connection, conn)


async def _serve_connection(conn: FakeConnection) -> None:
    count = 0
    while True:
        try:
            request = await conn.next_request()
        except Exception:  # the client went away: this connection is done
            return
        count += 1
        response_id = f"resp-local-{count}"
        if request.get("generate") is False:
            await conn.send_warmup(response_id)
            continue
        await _answer(conn, request, response_id)


def _last_input(request: dict[str, Any]) -> dict[str, Any] | None:
    items = request.get("input") or []
    return items[-1] if items else None


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content") or item.get("output") or ""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))


async def _answer(conn: FakeConnection, request: dict[str, Any], response_id: str) -> None:
    last = _last_input(request)
    await conn.send(frames.response_created(response_id))
    if last is not None and last.get("type") in ("custom_tool_call_output", "function_call_output"):
        await _stream_text(conn, response_id, "The tool returned:\n" + _text_of(last).strip())
        return
    prompt = _text_of(last).strip() if last is not None else ""
    if prompt.startswith("run:"):
        command = prompt[len("run:"):].strip() or "ls"
        script = f"const r = await tools.exec_command({{cmd: {json.dumps(command)}}});\ntext(r.output);"
        call = frames.custom_tool_call("call-local-1", "exec", script, item_id="ctc_local_1")
        await conn.send(frames.output_item_done(0, call))
        await conn.send(frames.completed(response_id, [call]))
        return
    reply = (
        f"Hello from trio_agent's local scripted model. You said: {prompt!r}. "
        "Set OPENAI_API_KEY to talk to a real model, or try `run: ls` to see the exec tool."
    )
    await _stream_text(conn, response_id, reply)


async def _stream_text(conn: FakeConnection, response_id: str, text: str) -> None:
    item_id = f"msg_{response_id}"
    message = frames.assistant_message(text, item_id=item_id, phase="final_answer")
    await conn.send(frames.output_item_added(0, {**message, "status": "in_progress", "content": []}))
    words = text.split(" ")
    for index, word in enumerate(words):
        await conn.send(frames.text_delta(0, word if index == 0 else " " + word))
    await conn.send(frames.output_item_done(0, message))
    await conn.send(frames.completed(response_id, [message]))
