"""Compactions and injected items the application asked for are recorded
(``input.compact``, ``input.inject``) at their point between frames and asked for again
there on replay (issue 29)."""

from __future__ import annotations

from pathlib import Path

import trio

import trio_agent as ta
from trio_agent.testing import Cassette, FakeResponsesServer, ReplayedTurn, frames, replay

from ..acceptance.test_compaction import COMPACTION_DONE
from ..conftest import EventLog, make_config, warm

NOTE = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "injected note"}]}


async def _model(server: FakeResponsesServer, injected: trio.Event) -> None:
    conn = await warm(server)
    await conn.next_request()
    await conn.send(frames.response_created("resp-1"))
    await conn.send(frames.text_delta(0, "working"))
    await injected.wait()
    await conn.send(frames.completed("resp-1", [frames.assistant_message("first answer")],
                                     usage_block=frames.usage(1_000)))
    follow = await conn.next_request()  # the injected note joined at the boundary
    assert "injected note" in str(follow["input"])
    await conn.send_final("resp-1b", "noted")
    await conn.next_request()  # the compaction
    await conn.send(COMPACTION_DONE)
    await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
    await conn.next_request()
    await conn.send_final("resp-2", "second answer")


async def _record(server: FakeResponsesServer, workspace: Path, path: Path) -> None:
    injected = trio.Event()
    log = EventLog()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_model, server, injected)
            async with ta.open_agent(make_config(server, workspace, record=path)) as agent:
                nursery.start_soon(log.consume, agent.events)
                first = await agent.prompt("first prompt")
                await log.wait_for(lambda e: e.kind is ta.EventKind.ASSISTANT_DELTA)
                assert await agent.inject([NOTE]) == "joined"
                injected.set()
                assert (await first.result()).final_message == "noted"
                await (await agent.compact()).result()
                assert (await (await agent.prompt("second prompt")).result()).final_message == "second answer"


async def test_a_compaction_and_an_injection_are_recorded_and_replayed(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "actions.jsonl"
    await _record(server, workspace, path)
    cassette = Cassette.load(path)
    kinds = [o.kind for o in cassette.inputs()]
    assert kinds == ["input.prompt", "input.inject", "input.compact", "input.prompt"]
    inject = cassette.inputs()[1]
    assert inject.data["joined"] is True and inject.data["items"] == [NOTE]
    delta = next(o for o in cassette.observations if "output_text.delta" in str(o.data))
    completed = next(o for o in cassette.observations if "first answer" in str(o.data))
    assert delta.line < inject.line < completed.line
    with trio.fail_after(20):  # before issue 29: the replay waited for a compaction never asked for
        result = await replay(path, workspace=workspace)
    result.check()
    assert result.turns == (ReplayedTurn(1, "completed", "noted"), ReplayedTurn(2, "completed", ""),
                            ReplayedTurn(3, "completed", "second answer"))


async def _mail_model(server: FakeResponsesServer) -> None:
    conn = await warm(server)
    await conn.next_request()
    await conn.send_final("resp-1", "first answer")
    triggered = await conn.next_request()  # the automatic turn the triggering mail started
    assert "from the reviewer" in str(triggered["input"])
    await conn.send_final("resp-2", "mail answered")


async def test_mail_the_application_posted_is_recorded_and_replayed(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "mail.jsonl"
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_mail_model, server)
            async with ta.open_agent(make_config(server, workspace, record=path)) as agent:
                await (await agent.prompt("first prompt")).result()
                mailed = await agent.post_mail("/root/reviewer", "from the reviewer", trigger_turn=True)
                assert mailed is not None
                assert (await mailed.result()).final_message == "mail answered"
    (mail,) = [o for o in Cassette.load(path).inputs() if o.kind == "input.mail"]
    assert (mail.data["author"], mail.data["trigger_turn"], mail.data["turn"]) == ("/root/reviewer", True, 2)
    with trio.fail_after(20):  # before issue 29: the replay waited for mail never posted
        result = await replay(path, workspace=workspace)
    result.check()
    assert result.turns == (ReplayedTurn(1, "completed", "first answer"),
                            ReplayedTurn(2, "completed", "mail answered"))
