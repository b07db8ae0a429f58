"""History survives a kill (issue 23, item 2; docs/app-server.md, "Durability").

A real ``trio-agent serve`` (on stdio, and on ``--listen ws://127.0.0.1:0``) whose
model is a ``FakeResponsesServer`` on loopback runs a turn that is provably running --
the model holds its answer (the server is waiting on it), or the command the model
asked for waits on a file (it is running) -- when the server gets SIGKILL. After a
restart on the same ``--home``:

- ``thread/read`` and ``thread/resume`` show that turn, ``interrupted``, with the
  input it had (and the command it was running);
- the next turn's request to the model carries exactly what the view shows: item by
  item, the prompts, the cell whose command the view shows (answered as aborted), and
  the ``<turn_aborted>`` marker where the view says ``interrupted``;
- a first turn that completed before stays as it was, once;
- the restored turn stays as it is through another restart.

Before the fix the killed turn was missing from both views while its prompt went to
the model in the next turn.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from trio_agent.testing import FakeResponsesServer

from ..cli._cli import cli_env
from ._killed import conversation, killed, serve_args, shown, start_running_turn, text_input
from ._live import STEP
from ._served import TRANSPORTS, served


@pytest.mark.parametrize("gate", ["model", "command", "second"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_turn_killed_with_its_server_is_interrupted_and_the_next_request_agrees(
    tmp_path: Path, transport: str, gate: str
) -> None:
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    workspace.mkdir()
    killed_prompt = "the killed prompt" if gate == "second" else "the first prompt"
    env = cli_env(OPENAI_API_KEY="sk-test")
    async with trio.open_nursery() as nursery:
        model = FakeResponsesServer()
        await nursery.start(model.serve)
        with trio.fail_after(STEP * 3):
            async with served(transport, serve_args(home, model), cwd=tmp_path, env=env) as (server, client):
                thread_id, turn_id = await start_running_turn(client, model, workspace, gate)
                await killed(server, workspace, gate)

            async with served(transport, serve_args(home, model), cwd=tmp_path, env=env) as (_, client):
                await client.initialize(name="after-the-kill")
                read = (await client.request("thread/read", {"threadId": thread_id, "includeTurns": True}))["thread"]
                *first, turn = read["turns"]
                assert (turn["id"], turn["status"]) == (turn_id, "interrupted")
                assert turn["items"][0]["type"] == "userMessage"
                assert turn["items"][0]["content"] == text_input(killed_prompt)
                assert [(t["status"], shown([t])) for t in first] == ([("completed", [
                    ("user", "the first prompt"), ("agent", "the first answer")])] if gate == "second" else [])
                if gate == "command":
                    (command,) = turn["items"][1:]
                    assert command["type"] == "commandExecution" and command["id"] == "call-cell/code-1"
                    assert "until [ -e" in command["commandActions"][0]["command"]
                else:
                    assert len(turn["items"]) == 1
                resumed = await client.request("thread/resume", {"threadId": thread_id})
                assert resumed["thread"]["turns"] == read["turns"]

                second = await client.request("turn/start", {"threadId": thread_id,
                                                             "input": text_input("the second prompt")})
                request = await model.accept_http()
                await request.send_final("resp-2", "the answer")
                await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == second["turn"]["id"])
                view = (await client.request("thread/read", {"threadId": thread_id, "includeTurns": True}))["thread"]

            said = conversation(request.body)
            assert said == shown(view["turns"])[:-1]  # all but the answer to this very request
            first_turn = [("user", "the first prompt"), ("agent", "the first answer")] if gate == "second" else []
            cells = [("cell", "call-cell")] if gate == "command" else []
            assert said == [*first_turn, ("user", killed_prompt), *cells, ("interrupted", ""),
                            ("user", "the second prompt")]
            assert shown(view["turns"])[-1] == ("agent", "the answer")
            if gate == "command":
                (answered,) = [item for item in request.body["input"] if item.get("type") == "custom_tool_call_output"]
                assert answered["call_id"] == "call-cell" and "aborted" in json.dumps(answered["output"])

            async with served(transport, serve_args(home, model), cwd=tmp_path, env=env) as (_, client):
                await client.initialize(name="once-more")
                again = await client.request("thread/read", {"threadId": thread_id, "includeTurns": True})
                assert again["thread"]["turns"] == view["turns"]
        nursery.cancel_scope.cancel()
