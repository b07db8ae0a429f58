"""A codex session goes back and forth (issue 24, item 2): the real codex CLI (0.171.0)
writes a session -- a *paginated* rollout, every line numbered by an ``ordinal`` --,
``trio-agent resume ID PROMPT`` (the installed console script) appends a turn to that
very file, and codex resumes the file again: no ``missing an ordinal`` refusal, and its
next request replays our turn, once.

Everyone talks to one loopback ``FakeResponsesServer`` over HTTP: codex through a
``model_providers.fake`` entry on 127.0.0.1 in a scratch ``CODEX_HOME`` (analytics,
feedback and update checks off; any other HTTP(S) goes to a dead loopback proxy:
``_codex_remote.codex_environment``), trio-agent through ``--api-base`` with
``OPENAI_API_KEY=sk-test``. Every codex process is gone afterwards (checked by pid).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import trio

from trio_agent.testing import FakeHttpRequest, FakeResponsesServer, frames

from ..cli._console import script
from ..cli._sessions import HINT, file_lines, texts
from ._clients import codex_binary
from ._codex_remote import STEP, codex_environment, reaped

Json = dict[str, Any]


def with_fake_provider(codex_home: Path, server: FakeResponsesServer) -> None:
    config = (codex_home / "config.toml").read_text().replace('model_provider = "loopback"', 'model_provider = "fake"')
    provider = f'[model_providers.fake]\nname = "fake"\nbase_url = "{server.http_base_url}"\nenv_key = "FAKE_KEY"\n'
    (codex_home / "config.toml").write_text(f"{config}\n{provider}")


async def answer_all(server: FakeResponsesServer, seen: list[FakeHttpRequest], reply: str) -> None:
    """Answer every request with ``reply`` until cancelled."""
    while True:
        request = await server.accept_http()
        seen.append(request)
        message = frames.assistant_message(reply, item_id=f"msg_{len(seen)}")
        await request.send_sse([frames.response_created(f"resp-{len(seen)}"), frames.output_item_done(0, message),
                                frames.completed(f"resp-{len(seen)}", [message])])


async def codex(server: FakeResponsesServer, env: dict[str, str], workspace: Path, tmp_path: Path, *args: str,
                reply: str) -> tuple[list[Json], list[FakeHttpRequest]]:
    """``codex exec --json ARGS``: its events and the requests it sent."""
    command = [str(codex_binary()), "exec", *args[:1], "--json", "--skip-git-repo-check", "-m", "gpt-5.5", *args[1:]]
    out, err = tmp_path / "codex.stdout", tmp_path / "codex.stderr"
    seen: list[FakeHttpRequest] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_all, server, seen, reply)
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = await trio.lowlevel.open_process(command, cwd=workspace, env={**env, "FAKE_KEY": "sk-fake"},
                                                       stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        async with reaped(process):
            with trio.fail_after(STEP):
                code = await process.wait()
        nursery.cancel_scope.cancel()
    assert code == 0 and "missing an ordinal" not in err.read_text(), err.read_text()[-3000:]
    return [json.loads(line) for line in out.read_text().splitlines()], seen


async def test_codex_resumes_a_session_after_trio_agent_appended_a_turn(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = codex_environment(tmp_path, workspace)
    codex_home = Path(env["CODEX_HOME"])
    with_fake_provider(codex_home, server)
    events, _ = await codex(server, env, workspace, tmp_path, "FIRST-PROMPT", reply="FIRST-ANSWER")
    assert events[0]["type"] == "thread.started" and events[-1]["type"] == "turn.completed"
    thread_id = events[0]["thread_id"]
    (path,) = (codex_home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl")
    before = file_lines(path)
    assert before[0]["payload"]["history_mode"] == "paginated" and all("ordinal" in line for line in before)

    seen: list[FakeHttpRequest] = []
    ours = {"TRIO_AGENT_HOME": str(tmp_path / "trio-home"), "OPENAI_API_KEY": "sk-test"}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_all, server, seen, "OUR-ANSWER")
        ran = await script("resume", "--api-base", server.http_base_url, "--transport", "https", thread_id,
                           "OUR-PROMPT", cwd=workspace, env={**env, **ours}, seconds=STEP)
        nursery.cancel_scope.cancel()
    assert ran.code == 0, ran.err
    assert ran.out.splitlines()[0] == "OUR-ANSWER" and ran.err.splitlines()[-1] == HINT + thread_id
    (request,) = seen
    assert texts(request.body).count("FIRST-PROMPT") == 1 and texts(request.body)[-1] == "OUR-PROMPT"
    after = file_lines(path)
    assert after[: len(before)] == before and [line["ordinal"] for line in after] == list(range(len(after)))

    events, sent = await codex(server, env, workspace, tmp_path, "resume", thread_id, "THIRD-PROMPT",
                               reply="THIRD-ANSWER")
    assert events[0] == {"type": "thread.started", "thread_id": thread_id} and events[-1]["type"] == "turn.completed"
    (resumed,) = [request for request in sent if "THIRD-PROMPT" in texts(request.body)]
    said = texts(resumed.body)
    assert [said.count(text) for text in ("FIRST-PROMPT", "OUR-PROMPT", "OUR-ANSWER")] == [1, 1, 1]
    assert said.index("FIRST-PROMPT") < said.index("OUR-PROMPT") < said.index("OUR-ANSWER") < said.index(
        "THIRD-PROMPT") == len(said) - 1
    final = file_lines(path)
    assert [line["ordinal"] for line in final] == list(range(len(final)))  # codex went on from our numbering
