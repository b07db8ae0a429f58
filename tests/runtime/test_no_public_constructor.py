"""``Agent``, ``Turn`` and ``TurnControl`` are made by the library only (``NoPublicConstructor``,
trio's habit): calling the class raises a ``TypeError`` that says how to get one, while
``open_agent``, ``spawn``, ``prompt``, ``post_mail`` and ``control`` still hand them out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted, warm

REFUSALS = [
    (ta.Agent,
     "trio_agent.Agent has no public constructor; open one with `async with ta.open_agent(config) as agent:`"),
    (ta.Turn, "trio_agent.Turn has no public constructor; await agent.prompt(...) returns one"),
    (ta.TurnControl, "trio_agent.TurnControl has no public constructor; turn.control() returns one"),
]


@pytest.mark.parametrize(("cls", "message"), REFUSALS, ids=lambda value: getattr(value, "__name__", ""))
async def test_user_code_cannot_construct_a_handle(cls: Any, message: str, nursery: trio.Nursery,
                                                   tmp_path: Path) -> None:
    config = ta.AgentConfig(auth="test-key", workspace=tmp_path)
    # Arguments of the right shape change nothing: the class refuses before __init__ runs.
    for args in [(), (config, nursery), (object(), object())]:
        with pytest.raises(TypeError) as caught:
            cls(*args)
        assert str(caught.value).startswith(message)


async def test_the_library_still_hands_them_out(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "first")
        await conn.next_request()  # the turn the mail started
        await conn.send_final("resp-2", "second")
        child = await server.accept()  # spawn(): a clean child warms up on its own socket
        await child.next_request()
        await child.send_warmup("resp-child-warmup")
        await child.next_request()
        await child.send_final("resp-3", "child")

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        assert type(agent) is ta.Agent
        turn = await agent.prompt("hello")
        assert type(turn) is ta.Turn and type(turn.control()) is ta.TurnControl
        assert (await turn.result()).final_message == "first"
        mailed = await agent.post_mail("/root/worker", "report", trigger_turn=True)
        assert type(mailed) is ta.Turn
        assert (await mailed.result()).final_message == "second"
        async with agent.spawn("helper") as child:
            assert type(child) is ta.Agent and child.path == "/root/helper"
            assert (await (await child.prompt("hi")).result()).final_message == "child"
