"""codex's HTTP harness for the ports of ``seeds/codex_pending_input_tests.rs.txt``: the
seeds' mock server is plain HTTP/SSE with ``store: false`` (every request replays the whole
history); the ports run the HTTPS transport on the in-memory seam, so "no further
request" is a checked fact, not a timeout (see ``test_pending_input_seeds``'s docstring for
the whole mapping)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import EventLog, FakeResponsesServer, scripted
from trio_agent.testing._http import FakeHttpRequest

__all__ = ["Requests", "finish", "http_config", "is_reasoning_added", "running", "stream", "terminal_statuses"]


def http_config(server: FakeResponsesServer, workspace: Path, **kw: Any) -> ta.AgentConfig:
    """codex's HTTP harness: ``store: false`` over HTTP/SSE, so every request replays."""
    responses_kw = {k: kw.pop(k) for k in ("max_attempts",) if k in kw}
    responses = ta.Responses(
        profile=ta.Profile.OPENAI,
        transport=ta.Transport.HTTPS, store=False, api_base_url=server.http_base_url, dialer=server.dial,
        **responses_kw,
    )
    kw.setdefault("model", "gpt-5.4")
    return ta.AgentConfig(auth="test-key", workspace=workspace, responses=responses, **kw)


async def stream(request: FakeHttpRequest, frames: Sequence[dict[str, Any]]) -> None:
    """Open the event stream and send ``frames`` (the stream stays open)."""
    await request.start_stream()
    for frame in frames:
        await request.send_event(frame)


async def finish(request: FakeHttpRequest, frames: Sequence[dict[str, Any]]) -> None:
    """Send the rest of an open stream and end it."""
    for frame in frames:
        await request.send_event(frame)
    await request.finish()


class Requests:
    """Every request the server received, in order.
    ``answers`` script the requests in order; a request beyond them is recorded and
    left unanswered (the seeds' mock servers would fail it), so the count is exact."""

    def __init__(self, server: FakeResponsesServer,
                 answers: Sequence[Callable[[FakeHttpRequest], Awaitable[None]]]) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._server = server
        self._answers = list(answers)

    async def serve(self) -> None:
        while True:
            request = await self._server.accept_http()
            self.bodies.append(request.body)
            if len(self.bodies) <= len(self._answers):
                await self._answers[len(self.bodies) - 1](request)


@contextlib.asynccontextmanager
async def running(
    server: FakeResponsesServer, requests: Requests, config: ta.AgentConfig, log: EventLog
) -> AsyncIterator[ta.Agent]:
    """The agent beside the scripted server; on exit, once every task is blocked (all
    in memory: nothing is in flight), no request is left unread."""
    async with scripted(requests.serve) as nursery:
        async with ta.open_agent(config) as agent:
            nursery.start_soon(log.consume, agent.events)
            yield agent
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()


def is_reasoning_added(event: ta.AgentEvent) -> bool:
    frame: Any = event.payload.get("event", {}) if event.kind is ta.EventKind.API_EVENT else {}
    return (event.payload.get("direction") == "inbound" and frame.get("type") == "response.output_item.added"
            and frame.get("item", {}).get("type") == "reasoning")


def terminal_statuses(log: EventLog) -> list[str]:
    return [str(e.payload["status"]) for e in log.events if e.kind.is_terminal]
