"""``codex exec --remote ws://...`` (the real codex 0.171.0 CLI) drives ``trio-agent serve``
(issue 22 item 5): a thread, an exec turn that runs a command, and a resume of that
thread in a second ``codex exec`` process -- on the built-in local model and on a
loopback fake Responses server. Every message trio-agent sent is checked against the
codex schema (the logging proxy between them keeps them all), and no codex process is
left behind.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from .._shell_line import is_shell_line
from ._codex_remote import STEP, Served, codex, codex_environment, read_turns, reaped, served

Json = dict[str, Any]


async def exec_remote(server: Served, env: dict[str, str], *args: str) -> list[Json]:
    """One ``codex exec --remote <server> --json ARGS`` (stdin closed); its JSONL events.
    It exits 0 and its process is gone."""
    command = [codex(), "exec", "--remote", server.url, "--json", "--skip-git-repo-check", *args]
    out, err = server.workspace.parent / "exec.stdout", server.workspace.parent / "exec.stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = await trio.lowlevel.open_process(command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                                   cwd=server.workspace, env=env)
    async with reaped(process):
        with trio.fail_after(STEP):
            assert await process.wait() == 0, err.read_text()[-3000:]
    lines = out.read_text().splitlines()
    assert lines and all(line.startswith("{") for line in lines), lines  # every stdout line is an event
    return [json.loads(line) for line in lines]


def items(events: list[Json], kind: str) -> list[Json]:
    return [event["item"] for event in events if event["type"] == "item.completed" and event["item"]["type"] == kind]


@pytest.mark.parametrize("model", ["local", "fake"])
async def test_codex_exec_remote_runs_a_thread_a_turn_and_a_resume(tmp_path: Path, model: str) -> None:
    async with served(tmp_path, model) as server:
        env = codex_environment(tmp_path, server.workspace)
        prompt = "run: echo hello-from-exec" if model == "local" else "hello over exec"
        first = await exec_remote(server, env, prompt)
        assert [event["type"] for event in first][:2] == ["thread.started", "turn.started"]
        assert first[-1]["type"] == "turn.completed" and first[-1]["usage"]["input_tokens"] >= 0
        thread_id = first[0]["thread_id"]
        (answer,) = items(first, "agent_message")
        if model == "local":  # the local model runs the command through exec / exec_command
            shell = [item for item in items(first, "command_execution")
                     if is_shell_line(item["command"], "echo hello-from-exec")]
            assert shell and shell[0]["exit_code"] == 0 and shell[0]["aggregated_output"].endswith("hello-from-exec\n")
            assert "hello-from-exec" in answer["text"]
        else:
            assert answer["text"] == server.answer(prompt)

        again = await exec_remote(server, env, "resume", thread_id, "and again")
        assert again[0] == {"type": "thread.started", "thread_id": thread_id}  # the same thread
        assert again[-1]["type"] == "turn.completed"
        assert server.answer("and again") in items(again, "agent_message")[0]["text"]
        methods = server.proxy.client_methods()  # (before this test's own thread/read below)
        assert methods.count("initialize") == 2 and "thread/start" in methods and "thread/resume" in methods
        assert server.proxy.connections == 2
        read = await read_turns(server, thread_id)
        assert len(read) == 2 and all(turn["status"] == "completed" for turn in read)
        errors = [message for message, _ in server.proxy.server_messages() if "error" in message]
        assert errors == []
        assert server.check_every_server_message() > 10
        if server.fake is not None:  # the resumed turn continues the conversation the model saw
            last = server.fake.requests[-1]
            assert last.get("previous_response_id") or "hello over exec" in json.dumps(last["input"])
