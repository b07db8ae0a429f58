"""Single-flight shared-prefix warmups (nanocodex ``cloned_builders_singleflight_one_shared_prefix_warmup``)."""

from __future__ import annotations

from pathlib import Path

import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import EventLog, scripted


def shared_config(server: FakeResponsesServer, workspace: Path) -> ta.AgentConfig:
    return ta.AgentConfig(
        auth="test-key", thinking=ta.Thinking.LOW, workspace=workspace,
        responses=ta.Responses(profile=ta.Profile.OPENAI,
                               websocket_url=server.url), prompt_cache_key="shared-prefix", shared_prompt_cache=True,
    )


async def test_cloned_configs_singleflight_one_shared_prefix_warmup(
    server: FakeResponsesServer, workspace: Path
) -> None:
    sessions: list[str] = []

    async def script() -> None:
        first = await server.accept()
        warmup = await first.next_request()
        assert warmup["prompt_cache_key"] == "shared-prefix"
        sessions.append(warmup["client_metadata"]["session_id"])
        await first.send_warmup("resp-shared-warmup")
        first_turn = await first.next_request()
        assert first_turn["previous_response_id"] == "resp-shared-warmup"
        await first.send_final("resp-first")
        second = await server.accept()
        second_turn = await second.next_request()
        assert second_turn["prompt_cache_key"] == "shared-prefix"
        assert "previous_response_id" not in second_turn
        assert second_turn["client_metadata"]["session_id"] != sessions[0]
        assert len(second_turn["input"]) == 5
        assert "generate" not in second_turn
        await second.send_final("resp-second")

    logs = [EventLog(), EventLog()]
    async with scripted(script) as nursery:
        for log, prompt in zip(logs, ["first turn", "second turn"], strict=True):
            async with ta.open_agent(shared_config(server, workspace)) as agent:
                nursery.start_soon(log.consume, agent.events)
                await (await agent.prompt(prompt)).result()
    first, second = (log.payloads("model.warmup.completed") for log in logs)
    assert [p["source"] for p in first] == ["response"]
    assert [p["source"] for p in second] == ["shared_prefix"]
    assert "response_id" not in second[0]


async def test_concurrent_agents_wait_for_the_one_warmup_in_flight(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def serve_agent(conn_index: int) -> None:
        conn = await server.accept()
        request = await conn.next_request()
        if request.get("generate") is False:
            await conn.send_warmup("resp-shared-warmup")
            request = await conn.next_request()
            assert request["previous_response_id"] == "resp-shared-warmup"
        else:
            assert "previous_response_id" not in request
        await conn.send_final(f"resp-{conn_index}")

    async def run_agent() -> None:
        async with ta.open_agent(shared_config(server, workspace)) as agent:
            await (await agent.prompt("hello")).result()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for index in range(3):
                nursery.start_soon(serve_agent, index)
            for _ in range(3):
                nursery.start_soon(run_agent)
    warmups = [body for body in server.requests if body.get("generate") is False]
    assert len(warmups) == 1


async def test_a_shared_prefix_agent_opens_its_socket_at_startup(
    server: FakeResponsesServer, workspace: Path
) -> None:
    # No warmup of its own, but the socket is open before the first prompt: the first
    # (full) request does not wait for the connect and the handshake.
    opened = trio.Event()

    async def script() -> None:
        first = await server.accept()
        await first.next_request()
        await first.send_warmup("resp-shared-warmup")
        await first.next_request()
        await first.send_final("resp-first")
        second = await server.accept()  # the second agent's startup, before its prompt
        opened.set()
        request = await second.next_request()
        assert "previous_response_id" not in request and "generate" not in request
        await second.send_final("resp-second")

    log = EventLog()
    async with scripted(script) as nursery:
        async with ta.open_agent(shared_config(server, workspace)) as first_agent:
            await (await first_agent.prompt("first")).result()
        async with ta.open_agent(shared_config(server, workspace)) as agent:
            nursery.start_soon(log.consume, agent.events)
            await opened.wait()
            await (await agent.prompt("hello")).result()
    kinds = log.kinds()
    assert kinds.index("model.connection.completed") < kinds.index("model.warmup.completed") < kinds.index(
        "run.started")
    (connected,) = log.of("model.connection.completed")
    assert connected.turn_id is None and connected.payload["purpose"] == "initial"
    (done,) = log.payloads("run.completed")
    assert done["connection_attempts"] == 1
