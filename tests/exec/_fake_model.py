"""A fake model for ``trio-agent exec`` runs, on a loopback ``FakeResponsesServer``: the
script of the transcripts in ``codex-sdks/`` (the real codex driven by the official
SDKs), answering every connection of every exec process until cancelled.

- a warmup (``generate: false``) -> completed;
- ``run: CMD`` -> an ``exec`` cell calling ``tools.exec_command`` (``login: false``) with CMD;
- a tool output -> ``command output was: <output>``;
- ``refuse ...`` -> an ``error`` frame (``fake server: this request is refused``);
- anything else -> ``hello from the fake model``.

Every answer reports 100 input tokens and 1 output token, so usage sums are visible.
``requests`` are kept on the server (``server.requests``) for assertions.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from trio_agent.testing import ClientDisconnected, FakeConnection, FakeResponsesServer, frames

REFUSAL = "fake server: this request is refused"
GREETING = "hello from the fake model"
USAGE = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 101}
Json = dict[str, Any]


def _text(item: Json) -> str:
    content = item.get("content") or item.get("output") or ""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))


def prompt_of(request: Json) -> str:
    """The text of the request's last user message ("" when there is none)."""
    for item in reversed(request.get("input") or []):
        if item.get("type") == "message" and item.get("role") == "user":
            return _text(item).strip()
    return ""


async def _answer(conn: FakeConnection, request: Json, response_id: str) -> None:
    if request.get("generate") is False:
        await conn.send_warmup(response_id)
        return
    await conn.send(frames.response_created(response_id))
    items = request.get("input") or []
    last = items[-1] if items else {}
    if last.get("type") in ("custom_tool_call_output", "function_call_output"):
        await conn.send(frames.completed(response_id, [frames.assistant_message(
            "command output was: " + _text(last).strip())], usage_block=USAGE))
        return
    prompt = prompt_of(request)
    if prompt.startswith("run:"):
        command = prompt[len("run:"):].strip()
        script = f"const r = await tools.exec_command({{cmd: {json.dumps(command)}, login: false}});\ntext(r.output);"
        call = frames.custom_tool_call(f"call-{response_id}", "exec", script)
        await conn.send(frames.completed(response_id, [call], usage_block=USAGE))
        return
    if prompt.startswith("refuse"):
        await conn.send_error(REFUSAL, code="invalid_request_error")
        return
    await conn.send(frames.completed(response_id, [frames.assistant_message(GREETING)], usage_block=USAGE))


async def _serve_connection(conn: FakeConnection, number: int) -> None:
    count = 0
    try:
        while True:
            request = await conn.next_request()
            count += 1
            await _answer(conn, request, f"resp-{number}-{count}")
    except ClientDisconnected:
        return


async def fake_model(server: FakeResponsesServer) -> None:
    """Answer every connection to ``server`` (already serving) until cancelled."""
    async with trio.open_nursery() as nursery:
        number = 0
        while True:
            conn = await server.accept()
            number += 1
            nursery.start_soon(_serve_connection, conn, number)
