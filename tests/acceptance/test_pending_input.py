"""Input that arrives while the agent may be busy (SPEC sec. 10): submit, start_if_idle,
interrupt_if_no_pending_input."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeResponsesServer

from ..conftest import make_config, scripted, warm


def user_texts(body: dict[str, Any]) -> list[str]:
    return [part["text"] for item in body["input"] if item.get("role") == "user" for part in item["content"]]


async def test_submit_starts_when_idle_and_steers_when_busy(server: FakeResponsesServer, workspace: Path) -> None:
    first_seen, release = trio.Event(), trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        first_seen.set()
        await release.wait()
        await conn.send_final("resp-1")
        steered = await conn.next_request()
        assert user_texts(steered) == ["also this"]
        await conn.send_final("resp-2", "both done")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            started = await agent.submit("do this")
            assert started.kind == "started"
            await first_seen.wait()
            steered = await agent.submit("also this")
            assert steered.kind == "steered" and steered.turn.turn_id == started.turn.turn_id
            release.set()
            assert (await started.turn.result()).final_message == "both done"


async def test_start_if_idle_declines_without_recording_anything(
    server: FakeResponsesServer, workspace: Path
) -> None:
    seen, release = trio.Event(), trio.Event()
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        seen.set()
        await release.wait()
        await conn.send_final("resp-1")
        bodies.append(await conn.next_request())
        await conn.send_final("resp-2")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            first = await agent.start_if_idle("first")
            assert isinstance(first, ta.Turn)
            await seen.wait()
            declined = await agent.start_if_idle("while busy")
            assert declined == ta.Declined("not_idle")
            release.set()
            await first.result()
            second = await agent.start_if_idle("second")
            assert isinstance(second, ta.Turn)
            await second.result()
    assert user_texts(bodies[0]) == ["second"]  # "while busy" was never recorded


# current_turn, stale_turn and pending_steer are the seed's cases, ported exactly in
# test_pending_input_seeds.py; a queued prompt is this runtime's own pending input.
@pytest.mark.parametrize("case", ["queued_prompt"])
async def test_interrupt_if_no_pending_input_checks_the_turn_and_the_queue(
    server: FakeResponsesServer, workspace: Path, case: str
) -> None:
    seen = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        seen.set()
        if case != "current_turn":
            # Nothing was interrupted: the turn (and whatever input waited) completes.
            await conn.send_final("resp-1")
            with contextlib.suppress(ClientDisconnected):  # until the agent closes
                while True:
                    await conn.next_request()
                    await conn.send_final("resp-more")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            turn = await agent.prompt("work")
            await seen.wait()
            turn_id = turn.turn_id
            if case == "stale_turn":
                turn_id += 100
            elif case == "pending_steer":
                await turn.steer("one more thing")
            elif case == "queued_prompt":
                await agent.prompt("next")
            interrupted = await agent.interrupt_if_no_pending_input(turn_id)
            assert interrupted is (case == "current_turn")
            if interrupted:
                with pytest.raises(ta.TurnCancelled):
                    await turn.result()
            else:
                await turn.result()


NOTE = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "context from the app"}]}


async def test_items_injected_while_idle_join_the_next_turn(server: FakeResponsesServer, workspace: Path) -> None:
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        bodies.append(await conn.next_request())
        await conn.send_final("resp-1")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            assert await agent.inject([NOTE]) == "queued"
            await (await agent.prompt("now work")).result()
    items = bodies[0]["input"]
    assert items[-2]["content"][0]["text"] == "now work"
    assert items[-1]["content"] == NOTE["content"]


@pytest.mark.parametrize("bad", [[], [{"no": "type"}], {"type": "message"}, ["text"]])
async def test_inject_refuses_what_is_not_a_list_of_items(
    server: FakeResponsesServer, workspace: Path, bad: Any
) -> None:
    # HTTPS: nothing connects until a prompt, so only the validation is exercised.
    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, api_base_url=server.http_base_url)
    with trio.fail_after(10):
        async with ta.open_agent(ta.AgentConfig(auth="k", workspace=workspace, responses=responses)) as agent:
            with pytest.raises(ta.InvalidPrompt, match=r"inject|injected item"):
                await agent.inject(bad)
            assert agent._queue.idle_items == []  # nothing was recorded
