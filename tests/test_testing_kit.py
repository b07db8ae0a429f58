"""The public test kit for users' own suites (issue 12, item 7): ``scripted``, the event
recorder, ``ClientDisconnected``, documented builders, and real commands under an
autojumping ``MockClock``."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
import trio_agent.testing as kit
from trio_agent.testing import (
    ClientDisconnected,
    EventLog,
    FakeResponsesServer,
    ScriptUnfinished,
    frames,
    record_events,
    scripted,
)

from ._os_facts import pid_alive
from .conftest import make_config, warm


async def test_scripted_fails_when_the_script_is_still_waiting(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeResponsesServer.in_memory()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)

        async def model() -> None:
            await server.accept()  # the agent never connects

        start = trio.current_time()
        with pytest.raises(ScriptUnfinished) as raised:
            async with scripted(model, 5):
                pass
        assert trio.current_time() - start == 5.0
        assert "scripted(" in str(raised.value) and "model" in str(raised.value)
        assert "the block finished, but the script was still waiting" in str(raised.value)
        nursery.cancel_scope.cancel()


async def test_scripted_says_when_the_block_is_the_one_still_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def model() -> None:
        await trio.lowlevel.checkpoint()

    with pytest.raises(ScriptUnfinished, match="the script finished, but the block was still running"):
        async with scripted(model, 2):
            await trio.sleep_forever()


async def test_scripted_passes_a_finished_script_and_reraises_its_failure() -> None:
    ran: list[str] = []

    async def fine() -> None:
        ran.append("fine")

    async with scripted(fine) as nursery:
        assert isinstance(nursery, trio.Nursery)
    assert ran == ["fine"]

    async def failing() -> None:
        raise AssertionError("the request had no prompt")

    with pytest.RaisesGroup(pytest.RaisesExc(AssertionError, match="the request had no prompt")):
        async with scripted(failing):
            await trio.sleep_forever()


async def test_the_event_recorder_waits_for_and_filters_events(server: FakeResponsesServer, tmp_path: Path) -> None:
    async def model() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "add", {"a": 2, "b": 3})
        await conn.next_request()
        await conn.send_final("resp-2", "it is 5")

    async def add(ctx: ta.ToolContext, args: dict[str, Any]) -> str:
        return str(args["a"] + args["b"])

    tools = ta.Tools.default().function("add", "Add numbers.", {"type": "object"}, add)
    config = make_config(server, tmp_path, tools=tools)
    async with scripted(model), ta.open_agent(config) as agent:
        async with record_events(agent.events) as log:
            turn = await agent.prompt("add 2 and 3")
            call = await log.wait_for("tool.call", tool="add")
            assert call.payload["call_id"] == "call-1"
            await turn.result()
            done = await log.wait_for(lambda event: event.kind.is_terminal)
            assert done.payload["status"] == "completed"
    assert log.kinds()[0] == "model.warmup.started"
    assert [p["tool"] for p in log.payloads(ta.EventKind.TOOL_RESULT)] == ["add"]
    assert log.of("run.completed") == [done]
    with pytest.raises(TypeError, match="predicate"):
        await log.wait_for(lambda event: True, tool="add")


async def test_the_recorder_raises_when_the_stream_ends_without_the_event(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    log = EventLog()

    async def model() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "hello")

    config = make_config(server, tmp_path)
    async with scripted(model) as nursery:
        async with ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("hi")).result()
        with pytest.raises(LookupError, match="ended without a matching event"):
            await log.wait_for("tool.call")
    assert log.ended and log.kinds()[-1] == "run.completed"


async def test_a_client_that_went_away_is_client_disconnected(server: FakeResponsesServer, tmp_path: Path) -> None:
    closed: list[ClientDisconnected] = []

    async def model() -> None:
        conn = await warm(server)
        with pytest.raises(ClientDisconnected) as raised:
            await conn.next_request()  # the agent closes instead of prompting
        closed.append(raised.value)
        with pytest.raises(ClientDisconnected):
            await conn.send_final("resp-late")

    config = make_config(server, tmp_path)
    async with scripted(model), ta.open_agent(config) as agent, record_events(agent.events) as log:
        await log.wait_for("model.warmup.completed")  # then the block ends: the agent closes
    (error,) = closed
    assert error.code == 1000
    assert "trio_websocket" not in type(error).__module__
    assert "closed the WebSocket (code 1000" in str(error)


def test_every_public_test_kit_callable_is_documented() -> None:
    missing = []
    for name in kit.__all__:
        value = getattr(kit, name)
        if name == "frames":
            for builder in frames.__all__:
                if not inspect.getdoc(getattr(frames, builder)):
                    missing.append(f"frames.{builder}")
            continue
        if not (inspect.isclass(value) or callable(value)):
            continue
        if not inspect.getdoc(value):
            missing.append(name)
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if attr.startswith("_"):
                    continue
                if (callable(member) or isinstance(member, property)) and not inspect.getdoc(member):
                    missing.append(f"{name}.{attr}")
    assert missing == []


def _exec_output(body: dict[str, Any]) -> dict[str, Any]:
    output = body["input"][0]["output"]
    text = output if isinstance(output, str) else "".join(part.get("text", "") for part in output)
    result: dict[str, Any] = json.loads(text[text.index("{"):])
    return result


async def test_real_commands_under_an_autojumping_mock_clock(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """A quick command is seen finished with its output; a long one yields at exactly its
    virtual yield deadline; closing the agent kills it; the clock's threshold is restored."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    pid_file = workspace / "pid"
    quick = "text(JSON.stringify(await tools.exec_command({cmd: 'echo hi', login: false})));"
    slow = (f"text(JSON.stringify(await tools.exec_command({{cmd: 'echo $$ > {pid_file}; exec sleep 60', "
            "login: false, yield_time_ms: 1000})));")
    results: list[tuple[float, dict[str, Any]]] = []
    server = FakeResponsesServer.in_memory()

    async def model() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", quick)
        body = await conn.next_request()
        results.append((trio.current_time(), _exec_output(body)))
        await conn.send_tool_call("resp-2", "call-2", "exec", slow)
        sent = trio.current_time()
        body = await conn.next_request()
        results.append((trio.current_time() - sent, _exec_output(body)))
        await conn.send_final("resp-3")

    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        # `$$` is a host pid only outside a sandbox's PID namespace: the unsandboxed path.
        config = make_config(server, workspace, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                       websocket_url=server.url, dialer=server.dial),
                             sandbox=ta.SandboxMode.DANGER_FULL_ACCESS)
        start = trio.current_time()
        async with scripted(model, 30), ta.open_agent(config) as agent:
            await (await agent.prompt("run them")).result()
        nursery.cancel_scope.cancel()
    (quick_at, quick_result), (slow_took, slow_result) = results
    assert quick_at == start and quick_result["exit_code"] == 0 and quick_result["output"] == "hi\n"
    assert slow_took == 1.0 and slow_result["session_id"] == 1 and "exit_code" not in slow_result
    assert not pid_alive(int(pid_file.read_text()))  # the agent's close killed it
    assert autojump_clock.autojump_threshold == 0


async def test_the_readme_https_half_runs(server: FakeResponsesServer, tmp_path: Path) -> None:
    async def model_over_https() -> None:
        request = await server.accept_http()
        assert request.headers["authorization"] == "Bearer test"
        await request.send_sse([frames.completed("resp-1", [frames.custom_tool_call("call-1", "exec", 'text("hi")')])])
        request = await server.accept_http()
        assert request.body["previous_response_id"] == "resp-1"  # an API key stores responses: chained
        assert [item["type"] for item in request.body["input"]] == ["custom_tool_call_output"]
        await request.send_final("resp-2", "done")

    config = ta.AgentConfig(auth="test", workspace=tmp_path,
                            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                   transport=ta.Transport.HTTPS, api_base_url=server.http_base_url))
    async with scripted(model_over_https), ta.open_agent(config) as agent:
        assert (await (await agent.prompt("say hi")).result()).final_message == "done"
