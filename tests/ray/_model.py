"""The model side of the Ray tests: one scripted Responses server in the driver's Trio
loop, on 127.0.0.1, answering every agent of every actor (they reach it over loopback).

- a warmup gets ``response.completed``;
- a prompt ``run: CMD`` gets an ``exec`` call running ``CMD`` through ``tools.exec_command``;
- a tool output gets a final answer quoting it;
- any other prompt gets a streamed final answer ``echo: <prompt>`` (a few deltas).
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio

from trio_agent.testing import ClientDisconnected, FakeConnection, FakeResponsesServer, frames


@contextmanager
def model_in_thread() -> Iterator[str]:
    """``serve_model`` on a Trio loop of its own thread, for tests whose driver is not
    Trio; yields its URL and stops it on exit."""
    started: queue.Queue[tuple[str, trio.lowlevel.TrioToken, trio.CancelScope]] = queue.Queue()

    async def main() -> None:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                server: FakeResponsesServer = await nursery.start(serve_model)
                started.put((server.url, trio.lowlevel.current_trio_token(), scope))

    thread = threading.Thread(target=trio.run, args=(main,), name="model-server")
    thread.start()
    url, token, scope = started.get(timeout=60)
    try:
        yield url
    finally:
        trio.from_thread.run_sync(scope.cancel, trio_token=token)
        thread.join()


async def serve_model(*, task_status: trio.TaskStatus[FakeResponsesServer] = trio.TASK_STATUS_IGNORED) -> None:
    server = FakeResponsesServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        task_status.started(server)
        while True:
            try:
                conn = await server.accept()
            except trio.BrokenResourceError:
                continue  # a client that went away during its handshake
            nursery.start_soon(_serve, conn)


async def _serve(conn: FakeConnection) -> None:
    count = 0
    while True:
        try:
            request = await conn.next_request()
        except ClientDisconnected:
            return
        count += 1
        try:
            await _answer(conn, request, f"resp-{count}")
        except ClientDisconnected:
            return


def text_of(item: dict[str, Any]) -> str:
    content = item.get("content") or item.get("output") or ""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))


async def _answer(conn: FakeConnection, request: dict[str, Any], response_id: str) -> None:
    if request.get("generate") is False:
        await conn.send_warmup(response_id)
        return
    last = (request.get("input") or [{}])[-1]
    if last.get("type") in ("custom_tool_call_output", "function_call_output"):
        await _stream(conn, response_id, "tool said: " + text_of(last).strip())
        return
    prompt = text_of(last).strip()
    if prompt.startswith("run:"):
        command = prompt.removeprefix("run:").strip()
        source = f"const r = await tools.exec_command({{cmd: {json.dumps(command)}, login: false}});\ntext(r.output);"
        call = frames.custom_tool_call(f"call-{response_id}", "exec", source, item_id=f"ctc_{response_id}")
        await conn.send_completed(response_id, [call])
        return
    await _stream(conn, response_id, f"echo: {prompt}")


async def _stream(conn: FakeConnection, response_id: str, text: str) -> None:
    message = frames.assistant_message(text, item_id=f"msg_{response_id}", phase="final_answer")
    await conn.send(frames.response_created(response_id))
    await conn.send(frames.output_item_added(0, {**message, "status": "in_progress", "content": []}))
    for index, word in enumerate(text.split(" ")):
        await conn.send(frames.text_delta(0, word if index == 0 else " " + word))
    await conn.send(frames.output_item_done(0, message))
    await conn.send(frames.completed(response_id, [message]))
