"""``AgentConfig(api_events=False)``: no ``api.event`` at all, every other event unchanged.

The same scripted session (a warmup, a streamed answer with a tool call, an
interrupting steer) runs with the option on and off on in-memory peers under
``MockClock(autojump_threshold=0)``; the stream without ``api.event`` must be the
stream with them, minus them: same kinds, same payloads, same turn ids and times, in
the same order. The server sees the same requests either way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, memory_config, scripted, warm


async def _session(workspace: Path, **kw: Any) -> tuple[list[ta.AgentEvent], list[dict[str, Any]]]:
    server = FakeResponsesServer.in_memory()
    requests: list[dict[str, Any]] = []
    streaming = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        requests.append(await conn.next_request())
        await conn.send_all([frames.response_created("resp-1"), frames.text_delta(0, "par"),
                             frames.text_delta(0, "tial")])
        streaming.set()
        requests.append(await conn.next_request())  # the interrupt
        await conn.send({"type": "response.incomplete", "response": {
            "id": "resp-1", "status": "incomplete", "incomplete_details": {"reason": "interrupted"}}})
        requests.append(await conn.next_request())
        await conn.send_tool_call("resp-2", "call-1", "add", {"a": 2, "b": 3})
        requests.append(await conn.next_request())
        await conn.send_final("resp-3", "it is 5")

    async def add(ctx: ta.ToolContext, args: dict[str, Any]) -> str:
        return str(args["a"] + args["b"])

    tools = ta.Tools.default().function("add", "Add numbers.", {"type": "object"}, add)
    log = EventLog()
    async with trio.open_nursery() as outer:
        await outer.start(server.serve)
        async with scripted(script, 20) as nursery:
            async with ta.open_agent(memory_config(server, workspace, tools=tools, **kw)) as agent:
                nursery.start_soon(log.consume, agent.events)
                turn = await agent.prompt("add 2 and 3")
                await streaming.wait()
                await turn.steer("use the tool", interrupt=True)
                assert (await turn.result()).final_message == "it is 5"
        outer.cancel_scope.cancel()
    return log.events, requests


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _ids_out(value: Any) -> Any:
    """``value`` with every UUID (item ids, the session id) replaced: each run has its own."""
    return json.loads(_UUID.sub("<uuid>", json.dumps(value)))


def _comparable(events: list[ta.AgentEvent]) -> list[tuple[str, int | None, float, Any]]:
    start = events[0].time  # each session starts later on the shared virtual clock
    return [(e.kind.value, e.turn_id, e.time - start, _ids_out(e.payload)) for e in events]


async def test_without_api_events_the_stream_is_the_same_minus_them(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    with_api, sent_with = await _session(tmp_path)
    without_api, sent_without = await _session(tmp_path, api_events=False)
    assert _ids_out(sent_with) == _ids_out(sent_without)
    assert not [e for e in without_api if e.kind is ta.EventKind.API_EVENT]
    kept = [e for e in with_api if e.kind is not ta.EventKind.API_EVENT]
    assert len(kept) < len(with_api)
    assert _comparable(without_api) == _comparable(kept)
    assert [e.seq for e in without_api] == list(range(1, len(without_api) + 1))


def test_api_events_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(ta.ConfigError, match="api_events must be True or False"):
        ta.AgentConfig(auth="test", workspace=tmp_path, api_events="no")  # type: ignore[arg-type]
