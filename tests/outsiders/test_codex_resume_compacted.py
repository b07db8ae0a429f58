"""The real codex CLI (0.171.0) resumes a rollout trio_agent wrote across a *local*
compaction (issue 23, item 3): ``codex exec resume <id> PROMPT`` replays the
``compacted`` line's ``replacement_history`` -- the kept user message and the summary
bridge -- and nothing from before it, then its own context and the new prompt.

Our agent runs against a loopback ``FakeResponsesServer`` without remote compaction (so
it compacts locally) and writes its rollout into a scratch ``CODEX_HOME``; codex is then
pointed at the same fake server through a ``model_providers.fake`` entry on 127.0.0.1
(analytics, feedback and update checks off; other HTTP(S) goes to a dead loopback
proxy), and the one request it sends is checked. The codex process is gone afterwards
(checked by pid).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import trio

import trio_agent as ta
from trio_agent._ids import uuid7_text
from trio_agent._session.summary import SUMMARY_PREFIX
from trio_agent.testing import FakeHttpRequest, FakeResponsesServer, frames

from ..conftest import scripted
from ._clients import codex_binary
from ._codex_remote import STEP, codex_environment, reaped

Json = dict[str, Any]


def message_texts(body: Json) -> list[str]:
    return ["".join(part.get("text", "") for part in item.get("content", []) if isinstance(part, dict))
            for item in body.get("input", []) if item.get("type") == "message"]


async def compact_locally(server: FakeResponsesServer, workspace: Path, codex_home: Path, thread_id: str) -> Path:
    """One turn and a local compaction by our agent; its rollout's path."""
    async def script() -> None:
        conn = await server.accept()
        assert (await conn.next_request())["generate"] is False
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-1", "FIRST-ANSWER")
        assert frames.is_compaction_request(await conn.next_request())
        await conn.send_final("resp-declined", "DECLINED-ANSWER")
        assert frames.is_summarization_request(await conn.next_request())
        await conn.send_final("resp-summary", "THE-SUMMARY-TEXT")

    config = ta.AgentConfig(auth="test-key", workspace=workspace, session_id=thread_id,
                            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                   websocket_url=server.url), rollout=ta.RolloutConfig(codex_home))
    async with scripted(script, STEP), ta.open_agent(config) as agent:
        await (await agent.prompt("FIRST-PROMPT")).result()
        await (await agent.compact()).result()
        assert agent.rollout is not None
        return agent.rollout.path


async def test_codex_resumes_a_rollout_after_a_local_compaction(server: FakeResponsesServer, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = codex_environment(tmp_path, workspace)  # a scratch CODEX_HOME, HTTP(S) to a dead proxy
    codex_home = Path(env["CODEX_HOME"])
    thread_id = uuid7_text()
    path = await compact_locally(server, workspace, codex_home, thread_id)
    assert path.is_relative_to(codex_home / "sessions") and path.name.endswith(f"-{thread_id}.jsonl")
    config = (codex_home / "config.toml").read_text().replace(
        'model_provider = "loopback"', 'model_provider = "fake"')
    (codex_home / "config.toml").write_text(
        config + f'\n[model_providers.fake]\nname = "fake"\nbase_url = "{server.http_base_url}"\n'
                 'env_key = "FAKE_KEY"\n')
    sent: list[FakeHttpRequest] = []

    async def model() -> None:
        request = await server.accept_http()
        sent.append(request)
        await request.send_sse([frames.completed("resp-codex", [frames.assistant_message("codex resumed")])])

    command = [str(codex_binary()), "exec", "resume", "--json", "--skip-git-repo-check", "-m", "gpt-5.5",
               thread_id, "NEXT-PROMPT"]
    out, err = tmp_path / "codex.stdout", tmp_path / "codex.stderr"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model)
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = await trio.lowlevel.open_process(command, cwd=workspace, env={**env, "FAKE_KEY": "sk-fake"},
                                                       stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        async with reaped(process):
            with trio.fail_after(STEP):
                assert await process.wait() == 0, err.read_text()[-3000:]
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert events[0] == {"type": "thread.started", "thread_id": thread_id} and events[-1]["type"] == "turn.completed"
    (request,) = sent
    assert request.method == "POST" and request.path == "/v1/responses"
    texts = message_texts(request.body)
    bridge = f"{SUMMARY_PREFIX}\nTHE-SUMMARY-TEXT"
    # The replacement history, in order, then codex's own context and the new prompt.
    assert texts.index("FIRST-PROMPT") < texts.index(bridge) < texts.index("NEXT-PROMPT") == len(texts) - 1
    replayed = json.dumps(request.body)
    assert "FIRST-ANSWER" not in replayed and "DECLINED-ANSWER" not in replayed
