"""Ports of the nanocodex turn-policy and chaining seeds (WebSocket, real loopback)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import assert_warmup, events_of, make_config, scripted


async def test_follow_on_prompts_can_change_turn_policy_without_restarting_the_session(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        assert_warmup(warmup)
        assert warmup["reasoning"]["effort"] == "low"
        assert warmup["input"][1]["content"][0]["text"] == "custom prompt"
        await conn.send_warmup("resp-warmup")
        first = await conn.next_request()
        assert first["previous_response_id"] == "resp-warmup"
        assert first["reasoning"]["effort"] == "low"
        assert "service_tier" not in first
        cache_key = first["prompt_cache_key"]
        await conn.send_final("resp-first")
        follow_on = await conn.next_request()
        assert follow_on["previous_response_id"] == "resp-first"
        assert follow_on["reasoning"]["effort"] == "high"
        assert follow_on["service_tier"] == "priority"
        assert follow_on["prompt_cache_key"] == cache_key
        assert len(follow_on["input"]) == 1
        assert follow_on["input"][0]["role"] == "user"
        assert follow_on["input"][0]["content"][0]["text"] == "second prompt"
        await conn.send_final("resp-second")
        standard = await conn.next_request()
        assert standard["previous_response_id"] == "resp-second"
        assert standard["reasoning"]["effort"] == "high"
        assert "service_tier" not in standard
        await conn.send_final("resp-third")

    out = io.StringIO()
    async with scripted(script) as nursery:
        config = make_config(server, workspace, instructions="custom prompt")
        async with ta.open_agent(config) as agent:
            nursery.start_soon(ta.write_jsonl, agent.events, out)
            first = await agent.prompt(ta.Prompt("first prompt"))
            assert (await first.result()).final_message == "done"
            await agent.set_thinking(ta.Thinking.HIGH)
            await agent.set_fast_mode(True)
            second = await agent.prompt(ta.Prompt("second prompt"))
            assert (await second.result()).final_message == "done"
            await agent.set_fast_mode(False)
            third = await agent.prompt(ta.Prompt("third prompt"))
            assert (await third.result()).final_message == "done"
    completed = events_of(out.getvalue(), "run.completed")
    assert len(completed) == 3
    assert [c["connection_attempts"] for c in completed] == [1, 0, 0]
    assert [c["response_attempts"] for c in completed] == [2, 1, 1]
    assert [c["effort"] for c in completed] == ["low", "high", "high"]


async def test_websocket_full_replay_never_sends_a_previous_response_id(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        first = await conn.next_request()
        assert "previous_response_id" not in first
        assert "first prompt" in json.dumps(first)
        await conn.send_final("resp-first")
        second = await conn.next_request()
        assert "previous_response_id" not in second
        tail = second["input"][-3:]
        assert [(item["role"], item["content"][0]["text"]) for item in tail] == [
            ("user", "first prompt"), ("assistant", "done"), ("user", "second prompt")
        ]
        await conn.send_final("resp-second")

    responses = ta.Responses(profile=ta.Profile.OPENAI,
                             websocket_url=server.url, store=False, history=ta.History.FULL_REPLAY)
    async with scripted(script):
        config = make_config(server, workspace, responses=responses, session_id="websocket-replay")
        async with ta.open_agent(config) as agent:
            await (await agent.prompt("first prompt")).result()
            await (await agent.prompt("second prompt")).result()


async def test_prompt_images_travel_as_input_images_and_remote_urls_are_not_fetched(
    server: FakeResponsesServer, workspace: Path
) -> None:
    png = (
        "data:image/png;base64,"
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk+A8AAQUBAScY42YAAAAASUVORK5CYII="
    )

    async def script() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        first = await conn.next_request()
        text, image, remote = first["input"][-1]["content"]
        assert text == {"type": "input_text", "text": "what is in these?"}
        assert image == {"type": "input_image", "image_url": png}
        assert remote["type"] == "input_text" and "remote image URLs are not supported" in remote["text"]
        await conn.send_final("resp-1")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            prompt = ta.Prompt("what is in these?", images=[png, "https://example.com/cat.png"])
            await (await agent.prompt(prompt)).result()


def test_prompts_reject_bad_images() -> None:
    with pytest.raises(ta.InvalidPrompt, match="URL strings"):
        ta.Prompt("x", images=[""])
