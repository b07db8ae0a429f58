"""``trio-agent serve --local`` compacts (issue 23, item 3): the built-in local model has
no remote compaction, as any backend but OpenAI's, so ``thread/compact/start`` falls
back to a local compaction -- the model's deterministic summary replaces the history --
and shows as a ``contextCompaction`` item and ``thread/compacted``, never as an
``agentMessage``. A real ``trio-agent serve --local`` subprocess on stdio, and the app
server in process on a real WebSocket; every message is checked against the codex
schema. The thread's rollout holds the ``compacted`` line codex writes for a local
compaction, and the thread resumes cold from it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import trio
import trio_websocket

import trio_agent as ta
from trio_agent._session.summary import SUMMARY_PREFIX
from trio_agent.testing import AppServerClient, WebSocketChannel

from ._harness import text_input
from ._live import serve_subprocess, websocket_server
from ._schema import validate_server_message

REPO = Path(ta.__file__).resolve().parent.parent
STEP = 20  # seconds for any one step (real processes and sockets)
Json = dict[str, Any]


async def run(client: AppServerClient, method: str, params: Json) -> tuple[Json, list[Json]]:
    """A turn started by ``method`` (``turn/start`` or ``thread/compact/start``); its
    ``turn/completed`` params and the messages it caused."""
    client.take_pending()
    await client.request(method, params)
    turn_id = (await client.read_notification("turn/started"))["turn"]["id"]
    done = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)
    return done, client.take_pending()


def compacted_lines(home: Path) -> list[Json]:
    (path,) = home.rglob("rollout-*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line["type"] == "compacted"]


async def scenario(client: AppServerClient, workspace: Path, home: Path) -> None:
    await client.initialize(name="compaction-client", version="1.0.0")
    started = await client.request("thread/start", {"model": "gpt-5.5", "cwd": str(workspace)})
    thread_id = started["thread"]["id"]
    first, _ = await run(client, "turn/start", {"threadId": thread_id, "input": text_input("remember 42")})
    assert first["turn"]["status"] == "completed"

    done, seen = await run(client, "thread/compact/start", {"threadId": thread_id})
    assert done["turn"]["status"] == "completed" and done["turn"]["items"] == []
    kinds = [m["params"]["item"]["type"] for m in seen if m.get("method") == "item/completed"]
    assert kinds == ["contextCompaction"]
    assert [m["params"] for m in seen if m.get("method") == "thread/compacted"] == [
        {"threadId": thread_id, "turnId": done["turn"]["id"]}]
    assert not [m for m in seen if "agentMessage" in json.dumps(m)]

    after, seen_after = await run(client, "turn/start", {"threadId": thread_id, "input": text_input("and now")})
    assert after["turn"]["status"] == "completed"
    (answer,) = [m["params"]["item"] for m in seen_after if m.get("method") == "item/completed"
                 and m["params"]["item"]["type"] == "agentMessage"]
    assert "and now" in answer["text"]

    (line,) = compacted_lines(home)
    summary = "the user sent 1 message(s): 'remember 42'"
    assert line["payload"]["message"].startswith(f"{SUMMARY_PREFIX}\n") and summary in line["payload"]["message"]
    replacement = line["payload"]["replacement_history"]
    assert replacement[-1]["content"] == [{"type": "input_text", "text": line["payload"]["message"]}]

    # The thread unloads (--unload-delay 0) and resumes cold from its rollout.
    assert await client.request("thread/unsubscribe", {"threadId": thread_id}) == {"status": "unsubscribed"}
    assert await client.read_notification("thread/closed") == {"threadId": thread_id}
    resumed = await client.request("thread/resume", {"threadId": thread_id})
    assert [t["status"] for t in resumed["thread"]["turns"]] == ["completed", "completed", "completed"]
    again, seen_again = await run(client, "turn/start", {"threadId": thread_id, "input": text_input("still?")})
    assert again["turn"]["status"] == "completed"
    assert "still?" in json.dumps(seen_again)


async def test_serve_local_compacts_over_stdio(tmp_path: Path) -> None:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "trio_agent", "serve", "--local", "--home", str(home), "--unload-delay", "0"]
    async with serve_subprocess(command, cwd=tmp_path, env=env) as (_, client):
        with trio.fail_after(STEP * 3):
            await scenario(client, workspace, home)


async def test_serve_local_compacts_over_websocket(tmp_path: Path) -> None:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    async with websocket_server(home, workspace) as port:
        async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}") as ws:
            client = AppServerClient(WebSocketChannel(ws), validate=validate_server_message)
            with trio.fail_after(STEP * 3):
                await scenario(client, workspace, home)
