"""HTTPS/SSE transport ports (nanocodex ``https_*``), over real loopback HTTP with httpx."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, scripted


def https_config(server: FakeResponsesServer, workspace: Path, session_id: str, **kw: Any) -> ta.AgentConfig:
    responses_kw = {k: kw.pop(k) for k in ("store", "history", "max_attempts", "http_client") if k in kw}
    responses = ta.Responses(profile=ta.Profile.OPENAI,
                             transport=ta.Transport.HTTPS, api_base_url=server.http_base_url, **responses_kw)
    return ta.AgentConfig(
        auth=kw.pop("auth", "test-key"), thinking=ta.Thinking.LOW, workspace=workspace, responses=responses,
        session_id=session_id, **kw,
    )


async def run_prompts(config: ta.AgentConfig, *prompts: str, log: EventLog | None = None) -> list[str]:
    answers = []
    async with trio.open_nursery() as nursery, ta.open_agent(config) as agent:
        if log is not None:
            nursery.start_soon(log.consume, agent.events)
        for prompt in prompts:
            answers.append((await (await agent.prompt(prompt)).result()).final_message)
    return answers


async def test_https_ephemeral_replays_complete_follow_on_history(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        first = await server.accept_http()
        assert first.path == "/v1/responses"
        assert first.body["store"] is False
        assert "type" not in first.body
        assert "previous_response_id" not in first.body
        assert "first prompt" in json.dumps(first.body)
        await first.send_final("resp-first")
        second = await server.accept_http()
        assert second.body["store"] is False
        assert "type" not in second.body
        assert "previous_response_id" not in second.body
        replay = json.dumps(second.body)
        assert "first prompt" in replay and "done" in replay and "second prompt" in replay
        tail = second.body["input"][-3:]
        assert [(item["role"], item["content"][0]["text"]) for item in tail] == [
            ("user", "first prompt"), ("assistant", "done"), ("user", "second prompt")
        ]
        await second.send_final("resp-second")

    # As the seed configures it: HTTPS and store: false, no history policy (derived: SPEC sec. 6).
    config = https_config(server, workspace, "https-ephemeral", store=False)
    assert config.responses.history is ta.History.FULL_REPLAY
    async with scripted(script):
        assert await run_prompts(config, "first prompt", "second prompt") == ["done", "done"]


async def test_https_stored_history_chains_on_the_previous_response(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        first = await server.accept_http()
        assert "previous_response_id" not in first.body
        assert len(first.body["input"]) == 5  # no warmup over HTTPS: prefix + context + prompt
        assert first.headers["authorization"] == "Bearer test-key"
        assert "openai-beta" not in first.headers
        assert "ws_request_header_x_openai_internal_codex_responses_lite" not in first.body["client_metadata"]
        await first.send_final("resp-first")
        second = await server.accept_http()
        assert second.body["previous_response_id"] == "resp-first"
        assert [item["content"][0]["text"] for item in second.body["input"]] == ["second prompt"]
        await second.send_final("resp-second")

    log = EventLog()
    async with scripted(script):
        await run_prompts(https_config(server, workspace, "https-stored"), "first prompt", "second prompt", log=log)
    assert "model.warmup.started" not in log.kinds()
    assert "model.connection.started" not in log.kinds()
    assert [p["transport"] for p in log.payloads("run.completed")] == ["responses_https_sse"] * 2


@attrs.define
class StaticChatGptAuth:
    recovered: list[str] = attrs.field(factory=list)
    token: str = "subscription-token"

    def validate(self) -> None:
        return None

    async def snapshot(self) -> ta.ChatGptAuthSnapshot:
        return ta.ChatGptAuthSnapshot(token=self.token, account_id="account-123")

    async def recover_unauthorized(self, rejected: ta.ChatGptAuthSnapshot) -> None:
        self.recovered.append(rejected.token)
        self.token = "refreshed-token"


async def test_chatgpt_https_uses_subscription_headers_and_ephemeral_replay(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        request = await server.accept_http()
        assert request.headers["authorization"] == "Bearer subscription-token"
        assert request.headers["chatgpt-account-id"] == "account-123"
        assert request.body["store"] is False
        assert "previous_response_id" not in request.body
        await request.send_final("resp-chatgpt")

    config = https_config(server, workspace, "https-chatgpt", auth=ta.ChatGptAuth(StaticChatGptAuth()))
    assert config.responses.history is ta.History.FULL_REPLAY  # ChatGPT's default store: false
    async with scripted(script):
        assert await run_prompts(config, "subscription prompt") == ["done"]


async def test_chatgpt_401_recovers_once_and_retries(server: FakeResponsesServer, workspace: Path) -> None:
    source = StaticChatGptAuth()

    async def script() -> None:
        rejected = await server.accept_http()
        assert rejected.headers["authorization"] == "Bearer subscription-token"
        await rejected.respond(401, '{"error":{"message":"token expired"}}')
        retried = await server.accept_http()
        assert retried.headers["authorization"] == "Bearer refreshed-token"
        await retried.send_final("resp-ok")

    config = https_config(server, workspace, "https-401", auth=ta.ChatGptAuth(source))
    async with scripted(script):
        assert await run_prompts(config, "hello") == ["done"]
    assert source.recovered == ["subscription-token"]


async def test_https_uses_the_configured_http_client(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        request = await server.accept_http()
        assert request.headers["x-nanocodex-client"] == "configured"
        await request.send_final("resp-configured-client")

    with trio.fail_after(10):
        async with httpx.AsyncClient(headers={"x-nanocodex-client": "configured"}) as client:
            config = https_config(server, workspace, "https-configured-client", http_client=client)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                assert await run_prompts(config, "configured client") == ["done"]
            assert not client.is_closed  # the application's client stays the application's


async def test_configured_attempt_limit_prevents_a_paid_request_replay(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    replayed = []

    async def script() -> None:
        request = await server.accept_http()
        await request.send_unexpected_end()
        with trio.move_on_after(5):
            replayed.append(await server.accept_raw())

    log = EventLog()
    config = https_config(server, workspace, "https-single-attempt", max_attempts=1)
    async with scripted(script, 60) as nursery:
        async with ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            with pytest.raises(ta.TurnFailed) as info:
                await (await agent.prompt("paid request")).result()
    assert not replayed
    assert isinstance(info.value.responses_error, ta.ConnectionLost)
    generation = [p for p in log.payloads("model.attempt.started") if p["phase"] == "generation"]
    assert len(generation) == 1 and generation[0]["max_attempts"] == 1
    assert "model.attempt.retrying" not in log.kinds()


async def test_https_429_retries_after_the_servers_delay_with_a_full_replay(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    times = []

    async def script() -> None:
        limited = await server.accept_http()
        times.append(trio.current_time())
        await limited.respond(429, '{"error":{"code":"rate_limit_exceeded","message":"slow down"}}',
                              headers=[("retry-after", "4")])
        retry = await server.accept_http()
        times.append(trio.current_time())
        assert "previous_response_id" not in retry.body
        await retry.send_final("resp-ok")

    log = EventLog()
    async with scripted(script, 60):
        await run_prompts(https_config(server, workspace, "https-429"), "hello", log=log)
    assert times[1] - times[0] == 4.0
    (retrying,) = log.payloads("model.attempt.retrying")
    assert retrying["error_class"] == "https_rate_limit"
    assert retrying["server_requested_delay"] is True
    assert retrying["delay_ns"] == 4_000_000_000


async def test_https_rejection_is_terminal_with_a_clear_error(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        request = await server.accept_http()
        await request.respond(400, '{"error":{"code":"invalid_request_error","message":"bad input"}}')

    async with scripted(script):
        async with ta.open_agent(https_config(server, workspace, "https-400")) as agent:
            with pytest.raises(ta.TurnFailed, match="HTTP 400") as info:
                await (await agent.prompt("hello")).result()
    error = info.value.responses_error
    assert error is not None and error.status == 400 and not error.retryable


async def test_https_interrupting_steer_closes_the_stream_and_continues_with_the_steer(
    server: FakeResponsesServer, workspace: Path
) -> None:
    streaming = trio.Event()

    async def script() -> None:
        first = await server.accept_http()
        await first.start_stream()
        await first.send_event(frames.response_created("resp-1"))
        call = frames.custom_tool_call("call-1", "exec", 'text("ran once")')
        await first.send_event(frames.output_item_done(0, call))
        streaming.set()
        second = await server.accept_http()  # the client gave the stream up
        assert "previous_response_id" not in second.body
        items = second.body["input"]
        assert [item.get("type") for item in items[-3:]] == ["custom_tool_call", "custom_tool_call_output", "message"]
        assert "ran once" in json.dumps(items[-2])
        assert items[-1]["content"][0]["text"] == "stop and summarise"
        await second.send_final("resp-2")
        with pytest.raises(trio.BrokenResourceError):
            for _ in range(100):  # the client closed the first stream
                await first.send_event(frames.text_delta(0, "ignored"))

    async with scripted(script):
        async with ta.open_agent(https_config(server, workspace, "https-interrupt")) as agent:
            turn = await agent.prompt("start")
            await streaming.wait()
            await trio.testing.wait_all_tasks_blocked()
            await turn.steer("stop and summarise", interrupt=True)
            assert (await turn.result()).final_message == "done"
