"""Mail waiting when a turn starts is in that turn's first request, exactly once
(issue 27 item 3; SPEC sec. 10: "queue-only mail is delivered with the next request of the
next turn").

Queue-only mail posted while the agent is idle waits; the next turn to start takes it.
For an *automatic* turn (raw items through ``start_if_idle``) that already holds -- the
codex seed ``idle_response_items_include_pending_mailbox_in_first_request``. For a *user*
turn (``prompt``) it does not yet: the first request carries only the prompt, the turn
ends after that one response, and the mail is recorded after the answer, so the model
answered without it. Each kind of turn is checked on both transports (the WebSocket
chaining its requests, HTTPS with ``store: false`` replaying everything), on the in-memory
seam so that the request count is exact: the mail is in the first request once, the
turn needs no second request for it, the history records it once, and the next turn's
request does not send it again (a chained request sends only what is new; a full
replay carries the one recorded copy).

The mail is posted to a fresh agent, before any turn: nothing is asleep, so it only waits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeResponsesServer, frames

from .._codex_frames import user_message_item
from ..conftest import memory_config
from ._codex_http import http_config

MAIL = "the worker's findings"
TRANSPORTS = [ta.Transport.WEBSOCKET, ta.Transport.HTTPS]


def mail_count(items: list[dict[str, Any]]) -> int:
    return sum(1 for item in items if item.get("type") == "agent_message"
               and item.get("content") == [{"type": "input_text", "text": MAIL}])


class Model:
    """Answers every generation request with a final message and records its body."""

    def __init__(self, server: FakeResponsesServer, transport: ta.Transport) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._server, self._transport = server, transport

    async def serve(self) -> None:
        if self._transport is ta.Transport.HTTPS:
            while True:
                request = await self._server.accept_http()
                self.bodies.append(request.body)
                await request.send_sse([frames.completed(f"resp-{len(self.bodies)}", [
                    frames.assistant_message(f"answer {len(self.bodies)}")])])
        conn = await self._server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        while True:
            try:
                self.bodies.append(await conn.next_request())
            except ClientDisconnected:
                return
            await conn.send_final(f"resp-{len(self.bodies)}", f"answer {len(self.bodies)}")


@asynccontextmanager
async def agent_and_model(server: FakeResponsesServer, workspace: Path,
                          transport: ta.Transport) -> AsyncIterator[tuple[ta.Agent, Model]]:
    model = Model(server, transport)
    config = (http_config(server, workspace) if transport is ta.Transport.HTTPS
              else memory_config(server, workspace))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model.serve)
        async with ta.open_agent(config) as agent:
            yield agent, model
        nursery.cancel_scope.cancel()


async def run_turn(agent: ta.Agent, kind: str) -> ta.TurnResult:
    if kind == "user":
        turn = await agent.prompt("do the task")
    else:
        started = await agent.start_if_idle([user_message_item("automatic response item")])
        assert isinstance(started, ta.Turn)
        turn = started
    with trio.fail_after(10):
        return await turn.result()


@pytest.mark.parametrize("transport", TRANSPORTS, ids=["websocket", "https"])
@pytest.mark.parametrize("kind", ["user", "automatic"])
async def test_mail_waiting_when_a_turn_starts_is_in_its_first_request_exactly_once(
    memory_server: FakeResponsesServer, workspace: Path, transport: ta.Transport, kind: str
) -> None:
    async with agent_and_model(memory_server, workspace, transport) as (agent, model):
        assert await agent.post_mail("/root/worker", MAIL) is None  # queue-only: it waits
        await run_turn(agent, kind)
        await trio.testing.wait_all_tasks_blocked()
        first_turn_requests = len(model.bodies)
        later = await (await agent.prompt("and the next thing")).result()

    first = model.bodies[0]
    assert mail_count(first["input"]) == 1, "the turn's first request carries the waiting mail, once"
    assert first_turn_requests == 1, "the model had the mail in its first request: nothing more to send"
    assert mail_count(later.snapshot().history) == 1  # recorded once
    next_request = model.bodies[first_turn_requests]
    replays = "previous_response_id" not in next_request
    assert mail_count(next_request["input"]) == (1 if replays else 0)  # never sent again as new input


def new_input(body: dict[str, Any]) -> list[str]:
    """A chained request's new items, each as ``prompt:<text>`` or ``mail:<text>``."""
    named = []
    for item in body["input"]:
        if item.get("type") == "agent_message":
            named.append("mail:" + item["content"][0]["text"])
        elif item.get("type") == "message" and item.get("role") == "user":
            text = item["content"][0]["text"]
            if not text.startswith("<"):  # not the context messages
                named.append("prompt:" + text)
    return named


async def test_mail_posted_before_a_turn_was_accepted_precedes_its_input(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    """The order of arrival: the mail came before the prompt (and before the raw items
    of an automatic turn), so history has it first."""
    async with agent_and_model(memory_server, workspace, ta.Transport.WEBSOCKET) as (agent, model):
        await agent.post_mail("/root/worker", "mail one")
        await agent.post_mail("/root/worker", "mail two")
        await (await agent.prompt("do the task")).result()
        await agent.post_mail("/root/worker", "mail three")
        await run_turn(agent, "automatic")
    assert [new_input(body) for body in model.bodies] == [
        ["mail:mail one", "mail:mail two", "prompt:do the task"],
        ["mail:mail three", "prompt:automatic response item"],
    ]


async def test_mail_posted_after_a_queued_turn_was_accepted_follows_its_input(
    memory_server: FakeResponsesServer, workspace: Path
) -> None:
    """A prompt queued behind a running turn, then triggering mail (it waits: the agent
    is busy). The running turn answers at once, so the mail is still waiting when the
    queued turn starts: that turn's first request carries it, after the prompt that was
    accepted before it, and no automatic turn starts for it (it was delivered)."""
    asked, release = trio.Event(), trio.Event()
    bodies: list[dict[str, Any]] = []

    async def serve() -> None:
        conn = await memory_server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        bodies.append(await conn.next_request())
        asked.set()
        await release.wait()
        await conn.send_final("resp-1", "answer 1")
        bodies.append(await conn.next_request())
        await conn.send_final("resp-2", "answer 2")
        with pytest.raises(ClientDisconnected):
            await conn.next_request()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        async with ta.open_agent(memory_config(memory_server, workspace)) as agent:
            first = await agent.prompt("first task")
            await asked.wait()
            second = await agent.prompt("second task")
            assert await agent.post_mail("/root/worker", "late mail", trigger_turn=True) is None  # busy: it waits
            release.set()
            await first.result()
            assert (await second.result()).final_message == "answer 2"
            await trio.testing.wait_all_tasks_blocked()
            assert agent.statistics().turns_accepted == 2  # the mail started no turn of its own
    assert [new_input(body) for body in bodies] == [["prompt:first task"], ["prompt:second task", "mail:late mail"]]
    assert bodies[1]["previous_response_id"] == "resp-1"
