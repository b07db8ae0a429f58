"""HTTPS replay with recorded timing is deterministic: the same cassette replayed 100
times in memory under ``MockClock(autojump_threshold=0)`` matches every time, with the
same events at the same virtual times (issue 29)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames, replay

from ..conftest import memory_config

RUNS = 100


async def _timed_https_model(server: FakeResponsesServer) -> None:
    first = await server.accept_http()
    await trio.sleep(1.0)
    await first.start_stream()
    await first.send_event(frames.response_created("resp-1"))
    await trio.sleep(0.5)
    await first.send_event(frames.text_delta(0, "thinking"))
    await trio.sleep(1.5)
    await first.send_event(frames.completed("resp-1", [frames.assistant_message("done")]))
    await trio.sleep(0.25)
    await first.finish()


async def _record(server: FakeResponsesServer, workspace: Path, path: Path) -> None:
    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS,
                             api_base_url=server.http_base_url, http_client=server.http_client())
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_timed_https_model, server)
            async with ta.open_agent(memory_config(server, workspace, record=path, responses=responses)) as agent:
                assert (await (await agent.prompt("hello")).result()).final_message == "done"


async def test_https_timed_replay_in_memory_is_the_same_every_run(
    memory_server: FakeResponsesServer, workspace: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "https-timed.jsonl"
    await _record(memory_server, workspace, path)
    runs: list[list[tuple[str, float]]] = []
    failures: list[str] = []
    for _ in range(RUNS):
        start = trio.current_time()
        result = await replay(path, workspace=workspace, timing=1.0, in_memory=True)
        if result.mismatch is not None:
            failures.append(result.mismatch.headline)
            continue
        runs.append([(e.kind.value, round(e.time - start, 6)) for e in result.events
                     if "duration" not in str(e.payload)])
    assert failures == [], (len(failures), failures[:3])
    assert all(run == runs[0] for run in runs)
    assert ("assistant.delta", 1.5) in runs[0]
