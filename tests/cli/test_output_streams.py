"""Which stream carries what (issue 24), driving the installed ``trio-agent`` console
script: stdout carries only the answer (human mode) or only the events (``--jsonl``);
notices, progress and the summary go to stderr -- so ``trio-agent run hi > answer.txt``
captures the answer alone. And the answer is printed even when the server sends the
final message only inside ``response.completed`` (no deltas, no ``output_item.done``)."""

from __future__ import annotations

import errno
import json
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import scripted
from ._cli import SCRIPT, cli_env, progress, run_cli

KEY = "sk-test"
LOCAL_ANSWER = ("Hello from trio_agent's local scripted model. You said: 'hi'. Set OPENAI_API_KEY to talk to a "
                "real model, or try `run: ls` to see the exec tool.")
NOTICE_END = "; using the built-in local scripted model (not a real model)"


def _only_in_completed(response_id: str, text: str) -> list[dict[str, Any]]:
    """What some Responses servers send: the message only in ``response.completed``'s output."""
    message = frames.assistant_message(text, item_id=f"msg_{response_id}")
    return [frames.response_created(response_id), frames.completed(response_id, [message])]


async def _against_a_terse_server(
    server: FakeResponsesServer, transport: str, text: str, cwd: Path, run: Any = None
) -> Any:
    """Run ``trio-agent run hi`` (``run``: how) against ``server`` sending ``text`` that way."""

    async def model() -> None:
        if transport == "https":
            request = await server.accept_http()
            await request.send_sse(_only_in_completed("resp-1", text))
            return
        conn = await server.accept()
        await conn.next_request()  # the prompt, at once: the CLI sends no warmup
        await conn.send_all(_only_in_completed("resp-1", text))

    flags = (["--transport", "https", "--api-base", server.http_base_url] if transport == "https"
             else ["--websocket-url", server.url])
    args = ["run", *flags, "--workspace", str(cwd), "hi"]
    async with scripted(model, 60):
        if run is not None:
            return await run(args)
        return await run_cli(*args, cwd=cwd, env=cli_env(OPENAI_API_KEY=KEY), command=SCRIPT)


@pytest.mark.parametrize("transport", ["https", "websocket"])
async def test_an_answer_sent_only_in_response_completed_is_printed(
    server: FakeResponsesServer, tmp_path: Path, transport: str
) -> None:
    result = await _against_a_terse_server(server, transport, "only in the completed output", tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert result.stdout.decode() == "only in the completed output\n"
    assert len(progress(err)) == 1, err
    assert err.startswith("-- completed: 1 model call(s), ")


async def test_stdout_redirected_to_a_file_captures_only_the_answer(tmp_path: Path) -> None:
    answer_file = tmp_path / "answer.txt"
    with answer_file.open("wb") as stdout, trio.fail_after(60):
        result = await trio.run_process([*SCRIPT, "run", "hi"], cwd=tmp_path, env=cli_env(), stdin=subprocess.DEVNULL,
                                        stdout=stdout, capture_stderr=True, check=False)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert answer_file.read_text() == LOCAL_ANSWER + "\n"
    lines = progress(err)
    assert lines[0].startswith("trio-agent: no OPENAI_API_KEY set") and lines[0].endswith(NOTICE_END)
    assert lines[1] == LOCAL_ANSWER  # the streamed text: progress
    assert lines[2].startswith("-- completed: 1 model call(s), ") and len(lines) == 3
    assert "Traceback" not in err


async def test_tool_calls_and_their_output_stay_off_stdout(tmp_path: Path, workspace: Path) -> None:
    result = await run_cli("run", "--workspace", str(workspace), "run: echo from-the-tool", cwd=tmp_path,
                           command=SCRIPT)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    out = result.stdout.decode()
    assert out.startswith("The tool returned:\n") and out.endswith("from-the-tool\n")  # the final message
    assert "[tool]" not in out and "  | " not in out and "-- completed" not in out
    assert "[tool] exec_command {'cmd': 'echo from-the-tool'}" in progress(err)
    assert "  | from-the-tool" in progress(err)
    assert progress(err)[-1].startswith("-- completed: 2 model call(s), ")


async def test_jsonl_stdout_carries_only_events(tmp_path: Path) -> None:
    result = await run_cli("run", "--jsonl", "hi", cwd=tmp_path, command=SCRIPT)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    events = [json.loads(line) for line in result.stdout.decode().splitlines()]  # every line is an event
    assert events[-1]["type"] == "run.completed"
    assert progress(err)[0].endswith(NOTICE_END) and len(progress(err)) == 1


# -- on a terminal: stdout and stderr are the same pty --------------------------------------


async def _on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run the console script with stdout and stderr on one pty; its exit status and
    everything the terminal showed (newlines as ``\\n``)."""
    controller, terminal = pty.openpty()
    shown = bytearray()
    try:
        process = await trio.lowlevel.open_process([*SCRIPT, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                                   stdout=terminal, stderr=terminal)
        os.close(terminal)
        terminal = -1
        stream = trio.lowlevel.FdStream(os.dup(controller))
        with trio.fail_after(60):
            async with stream:
                while True:
                    try:
                        data = await stream.receive_some(65536)
                    except trio.BrokenResourceError as exc:  # EIO: every writer closed the terminal
                        assert isinstance(exc.__cause__, OSError) and exc.__cause__.errno == errno.EIO
                        break
                    if not data:
                        break
                    shown += data
            code = await process.wait()
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    return code, shown.decode().replace("\r\n", "\n")


async def test_on_a_terminal_the_streamed_answer_is_shown_once(tmp_path: Path) -> None:
    code, shown = await _on_a_terminal(["run", "hi"], tmp_path, cli_env())
    assert code == 0, shown
    assert shown.count(LOCAL_ANSWER) == 1, shown
    assert "Traceback" not in shown


@pytest.mark.parametrize("transport", ["https", "websocket"])
async def test_on_a_terminal_an_answer_no_event_showed_is_printed(
    server: FakeResponsesServer, tmp_path: Path, transport: str
) -> None:
    async def run(args: list[str]) -> tuple[int, str]:
        return await _on_a_terminal(args, tmp_path, cli_env(OPENAI_API_KEY=KEY))

    code, shown = await _against_a_terse_server(server, transport, "terse answer", tmp_path, run)
    assert code == 0, shown
    assert shown.count("terse answer") == 1, shown
    assert progress(shown)[-2].startswith("-- completed: 1 model call(s), "), shown
    assert progress(shown)[-1] == "terse answer"  # after the summary: nothing streamed it
