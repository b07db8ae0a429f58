"""``drive_turn`` against an in-process app server (the fake model in memory): what exec
asks the server, and that every message the server answers is the app-server protocol.

The server's end of the connection is wrapped so the test sees both directions: each
request exec sends is recorded, each message the server sends is checked against the
real schema (``validate_server_message``) before exec reads it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._serve import open_app_server
from trio_agent.cli._exec._events import TurnOutcome
from trio_agent.cli._exec._output import JsonlOutput
from trio_agent.cli._exec._session import ExecRequest, ExecResult, MemoryChannel, drive_turn, turn_params
from trio_agent.testing import FakeResponsesServer

from .._shell_line import is_shell_line
from ..serve._schema import validate_server_message
from ._exec_schema import check_event
from ._fake_model import GREETING, fake_model, prompt_of

Json = dict[str, Any]
STEP = 30  # seconds for one turn (real subprocesses for commands)
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")


class Recorder:
    """The server's end, seen from the test: exec's requests, the server's messages."""

    def __init__(self, inner: MemoryChannel) -> None:
        self._inner = inner
        self.requests: list[Json] = []
        self.server_requests: list[str] = []
        self._methods: dict[object, str] = {}

    def sent(self, method: str) -> list[Json]:
        return [r["params"] for r in self.requests if r.get("method") == method]

    async def send(self, text: str) -> None:
        message = json.loads(text)
        validate_server_message(message, self._methods.get(message.get("id")) if "method" not in message else None)
        if "method" in message and "id" in message:
            self.server_requests.append(message["method"])
        await self._inner.send(text)

    async def send_batch(self, texts: list[str]) -> None:
        for text in texts:
            await self.send(text)

    async def receive(self) -> str:
        text = await self._inner.receive()
        message = json.loads(text)
        if "method" in message and "id" in message:
            self.requests.append(message)
            self._methods[message["id"]] = message["method"]
        return text

    async def aclose(self) -> None:
        await self._inner.aclose()


@attrs.define
class Run:
    result: ExecResult
    events: list[Json]
    recorder: Recorder


@asynccontextmanager
async def fake_model_server() -> AsyncIterator[FakeResponsesServer]:
    server = FakeResponsesServer.in_memory()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        nursery.start_soon(fake_model, server)
        yield server
        nursery.cancel_scope.cancel()


async def run_turn(server: FakeResponsesServer, home: Path, request: ExecRequest) -> Run:
    """One exec turn on a fresh app server of ``home`` (as a new exec process would)."""
    config = ta.AgentConfig(auth="test-key", workspace=Path(request.cwd),
                            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                   websocket_url=server.url, dialer=server.dial))
    stdout = trio.testing.MemorySendStream()
    recorders: list[Recorder] = []
    with trio.fail_after(STEP):
        async with open_app_server(config, home=home) as app:

            async def serve(channel: MemoryChannel) -> None:
                recorders.append(Recorder(channel))
                await app.serve_connection(recorders[-1], label="exec test")

            result = await drive_turn(serve, request, JsonlOutput(stdout))
    events = [json.loads(line) for line in stdout.get_data_nowait().decode().splitlines()]
    for event in events:
        check_event(event)
    return Run(result, events, recorders[0])


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


async def test_a_turn_asks_what_codex_exec_asks_and_every_answer_is_the_protocol(tmp_path: Path,
                                                                                workspace: Path) -> None:
    async with fake_model_server() as server:
        run = await run_turn(server, tmp_path / "home", ExecRequest("hello", cwd=str(workspace)))
    assert run.result == ExecResult(TurnOutcome.COMPLETED, 0, run.events[0]["thread_id"], GREETING)
    assert [e["type"] for e in run.events] == ["thread.started", "turn.started", "item.completed", "turn.completed"]
    assert [r["method"] for r in run.recorder.requests] == ["initialize", "thread/start", "turn/start"]
    assert run.recorder.sent("thread/start") == [{"ephemeral": False, "cwd": str(workspace), "approvalPolicy": "never"}]
    (start,) = run.recorder.sent("turn/start")
    assert start == {"threadId": run.result.thread_id, "approvalPolicy": "never",
                     "input": [{"type": "text", "text": "hello", "text_elements": []}]}


async def test_turn_start_carries_the_output_schema(tmp_path: Path, workspace: Path) -> None:
    """--output-schema FILE becomes turn/start's ``outputSchema`` as the file has it."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    async with fake_model_server() as server:
        run = await run_turn(server, tmp_path / "home", ExecRequest("hello", cwd=str(workspace),
                                                                    output_schema=schema))
    (start,) = run.recorder.sent("turn/start")
    assert start["outputSchema"] == schema
    assert turn_params("t", ExecRequest("hello"))  # (without one, no outputSchema key at all:)
    assert "outputSchema" not in turn_params("t", ExecRequest("hello"))


async def test_images_effort_and_writable_roots_reach_the_turn(tmp_path: Path, workspace: Path) -> None:
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    extra = tmp_path / "extra"
    extra.mkdir()
    request = ExecRequest("hello", cwd=str(workspace), images=(str(image),), effort="low", sandbox="workspace-write",
                          writable_roots=(str(extra),))
    async with fake_model_server() as server:
        run = await run_turn(server, tmp_path / "home", request)
        model_requests = [r for r in server.requests if r.get("generate") is not False]
    assert run.result.status == 0
    (start,) = run.recorder.sent("turn/start")
    assert start["input"][0] == {"type": "localImage", "path": str(image)}
    assert start["effort"] == "low"
    assert start["sandboxPolicy"] == {"type": "workspaceWrite", "writableRoots": [str(extra)], "networkAccess": False}
    assert run.recorder.sent("thread/start")[0]["sandbox"] == "workspace-write"
    (user,) = [item for item in model_requests[-1]["input"] if item.get("role") == "user" and any(
        part.get("type") == "input_image" for part in item.get("content", []))]
    assert any(part.get("image_url", "").startswith("data:image/png;base64,") for part in user["content"])
    assert model_requests[-1]["reasoning"]["effort"] == "low"


async def test_resume_continues_the_thread_on_a_new_server(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "home"
    async with fake_model_server() as server:
        first = await run_turn(server, home, ExecRequest("hello", cwd=str(workspace)))
        thread_id = first.result.thread_id
        second = await run_turn(server, home, ExecRequest("again", cwd=str(workspace), resume=thread_id))
        last = await run_turn(server, home, ExecRequest("and again", cwd=str(workspace), resume_last=True))
        model_requests = [r for r in server.requests if r.get("generate") is not False]
    assert second.result.thread_id == last.result.thread_id == thread_id
    assert second.events[0] == {"type": "thread.started", "thread_id": thread_id}
    assert [r["method"] for r in second.recorder.requests] == ["initialize", "thread/resume", "turn/start"]
    assert [r["method"] for r in last.recorder.requests] == ["initialize", "thread/list", "thread/resume",
                                                             "turn/start"]
    assert prompt_of(model_requests[-1]) == "and again"
    # The thread's history went with it: the first prompt is in the last request's context,
    # or the request continues the previous response.
    texts = json.dumps(model_requests[-1]["input"])
    assert "hello" in texts or model_requests[-1].get("previous_response_id")
    usage = [e["usage"] for e in (first.events + second.events + last.events) if e["type"] == "turn.completed"]
    assert [u["input_tokens"] for u in usage] == [100, 200, 300]  # the thread's total, as codex prints it


async def test_resuming_an_unknown_thread_is_an_error_event_and_status_1(tmp_path: Path, workspace: Path) -> None:
    async with fake_model_server() as server:
        run = await run_turn(server, tmp_path / "home", ExecRequest(
            "hello", cwd=str(workspace), resume="01a2338d-2ce8-75f0-88ba-4846b1edb5a6"))
        last = await run_turn(server, tmp_path / "home2", ExecRequest("hello", cwd=str(workspace),
                                                                      resume_last=True))
    assert run.result.status == 1 and run.result.outcome is None
    (event,) = run.events
    assert event["type"] == "error" and "thread not found" in event["message"]
    assert last.result.status == 1 and "no thread to resume" in last.events[0]["message"]


async def test_a_failed_turn_is_turn_failed_and_status_1(tmp_path: Path, workspace: Path) -> None:
    async with fake_model_server() as server:
        run = await run_turn(server, tmp_path / "home", ExecRequest("refuse this", cwd=str(workspace)))
    assert run.result.status == 1 and run.result.outcome is TurnOutcome.FAILED
    assert [e["type"] for e in run.events] == ["thread.started", "turn.started", "error", "turn.failed"]
    assert "fake server: this request is refused" in run.events[-1]["error"]["message"]


async def test_approval_requests_are_refused_so_the_command_is_declined(tmp_path: Path, workspace: Path) -> None:
    """Nobody can answer an approval in exec: under ``untrusted`` a command that needs
    one is declined and does not run (positive control: under ``never`` it runs)."""
    async with fake_model_server() as server:
        asked = await run_turn(server, tmp_path / "home", ExecRequest(
            "run: touch made-by-the-command", cwd=str(workspace), approval="untrusted"))
        assert not (workspace / "made-by-the-command").exists()
        allowed = await run_turn(server, tmp_path / "home", ExecRequest(
            "run: touch made-by-the-command", cwd=str(workspace), approval="never"))
    commands = [e["item"] for e in asked.events if e["type"] == "item.completed"
                and e["item"]["type"] == "command_execution"
                and is_shell_line(e["item"]["command"], "touch made-by-the-command")]
    assert commands and commands[-1]["status"] == "declined"
    assert asked.recorder.server_requests == ["item/commandExecution/requestApproval"]
    assert allowed.result.status == 0 and (workspace / "made-by-the-command").exists()
