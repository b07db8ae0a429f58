"""A completed turn ends in the task step that read its last frame (issue 30, item 4):
``model.call.completed``, the terminal ``run.completed`` and the result go out together,
with no schedule point between them -- the bare client's turn also ends where it reads
``response.completed`` -- over both transports.

An add-on's observer sees each event in the emitting task (the observer seam); a Trio
instrument numbers the task steps, so two events of one step carry the same number."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import trio_agent as ta
from trio_agent._runtime import _observers
from trio_agent._runtime._observers import AgentObserver, AgentSite
from trio_agent.testing import FakeResponsesServer

from ..conftest import make_config, scripted


class StepNumbers(trio.abc.Instrument):
    def __init__(self) -> None:
        self.step = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.step += 1


class Stamped(AgentObserver):
    events = True

    def __init__(self, steps: StepNumbers, log: list[tuple[str, int]]) -> None:
        self.steps = steps
        self.log = log

    def on_event(self, event: ta.AgentEvent) -> None:
        self.log.append((event.kind.value, self.steps.step))


class StepAddOn:
    def __init__(self) -> None:
        self.steps = StepNumbers()
        self.log: list[tuple[str, int]] = []

    def open(self, config: ta.AgentConfig) -> StepAddOn | None:
        return self if config.session_id.startswith("observed") else None

    def observe(self, site: AgentSite) -> Stamped:
        return Stamped(self.steps, self.log)

    def close(self) -> None:
        pass

    def step_of(self, kind: str) -> int:
        return [step for seen, step in self.log if seen == kind][-1]


@pytest.fixture
def addon(monkeypatch: pytest.MonkeyPatch) -> StepAddOn:
    installed = StepAddOn()
    monkeypatch.setattr(_observers, "_ADDONS", [*_observers._ADDONS, installed])
    return installed


@pytest.mark.parametrize("transport", ["websocket", "https"])
async def test_the_terminal_event_and_result_leave_in_the_step_that_read_the_last_frame(
    server: FakeResponsesServer, workspace: Path, addon: StepAddOn, transport: str
) -> None:
    https = transport == "https"

    async def script() -> None:
        if https:
            for n in (1, 2):
                request = await server.accept_http()
                await request.send_final(f"resp-{n}", "hi")
        else:
            conn = await server.accept()
            await conn.next_request()  # the startup warmup
            await conn.send_warmup("resp-warmup")
            for n in (1, 2):
                await conn.next_request()
                await conn.send_final(f"resp-{n}", "hi")

    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS,
                             api_base_url=server.http_base_url) if https else None
    config = make_config(server, workspace, session_id="observed-steps", responses=responses)
    trio.lowlevel.add_instrument(addon.steps)
    try:
        async with scripted(script), ta.open_agent(config) as agent:
            for text in ("first", "second"):  # the first turn, then a warm one
                turn = await agent.prompt(text)
                assert (await turn.result()).final_message == "hi"
                # the model call's end, the terminal event and the result: one step
                assert addon.step_of("model.call.completed") == addon.step_of("run.completed")
                assert agent.statistics().running_turn is None  # and the agent is idle already
    finally:
        trio.lowlevel.remove_instrument(addon.steps)
    kinds = [kind for kind, _ in addon.log]
    assert kinds.count("run.completed") == 2
