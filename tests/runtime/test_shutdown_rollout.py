"""An agent cancelled from outside (the app server shutting down) leaves its cancelled
turn's committed history in the rollout: the prompt and the ``<turn_aborted>`` marker.

The turn task runs its abort only after the agent's shutdown began; with no tool
running there is no checkpoint in between, so the rollout must be closed after every
task of the agent has ended, not in the shutdown itself. Checked on the file as
written (``read_history``), not through ``load_session``, which would add a missing
marker itself.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

import trio_agent as ta
from trio_agent._rollout import read_history
from trio_agent.testing import FakeResponsesServer

from .._helpers import content_texts


async def test_an_outer_cancellation_writes_the_prompt_and_the_abort_marker(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    server = FakeResponsesServer.in_memory()
    home = tmp_path / "home"
    config = ta.AgentConfig(
        auth="k", workspace=tmp_path, session_id="cancelled-thread", rollout=ta.RolloutConfig(home),
        responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, dialer=server.dial),
    )
    asked = trio.Event()

    async def model() -> None:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()  # the turn's request: never answered
        asked.set()
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        nursery.start_soon(model)
        with trio.CancelScope() as outer:
            async with ta.open_agent(config) as agent:
                path = agent.rollout.path if agent.rollout is not None else None
                turn = await agent.prompt("keep me")
                await asked.wait()
                outer.cancel()  # as the server's shutdown cancels a thread
        assert turn.status is ta.TurnStatus.CANCELLED
        nursery.cancel_scope.cancel()
    assert path is not None
    _meta, history = read_history(path)
    prompt, marker = history[-2:]
    assert content_texts(prompt) == ["keep me"]
    assert marker["role"] == "user" and content_texts(marker)[0].startswith("<turn_aborted>")
