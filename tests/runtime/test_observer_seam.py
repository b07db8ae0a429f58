"""The observer seam (issue 26 item 2): an add-on installed the way the package face
installs tracing and the cassette recorder sees an agent tree through it alone -- its
events, each turn's input and end, and one connection tap for the WebSocket and HTTPS
-- and an observer that raises is dropped with a warning while the agent goes on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent._errors import ResponsesError
from trio_agent._events import EventSink
from trio_agent._runtime import _observers
from trio_agent._runtime._observers import AgentObserver, AgentSite
from trio_agent._runtime._turns._turn import Prompt
from trio_agent._transport.tap import Answer
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import make_config, scripted, warm


class Notes(AgentObserver):
    """Everything one agent's observer is told, as ``(what, ...)`` tuples, in order."""

    name = "the test observer"
    events = True

    def __init__(self, site: AgentSite, log: list[tuple[Any, ...]], fail_on: str | None) -> None:
        self.path = site.path
        self.log = log
        self.fail_on = fail_on
        self.tap = self
        log.append(("observe", site.path, site.origin))

    def _note(self, *what: Any) -> None:
        if what[0] == self.fail_on:
            raise RuntimeError(f"observer broke on {what[0]}")
        self.log.append((what[0], self.path, *what[1:]))

    def on_event(self, event: ta.AgentEvent) -> None:
        if event.kind.is_terminal or event.kind is ta.EventKind.RUN_STARTED:
            self._note("event", event.kind.value)

    def accepted(self, turn_id: int, prompt: Prompt | None) -> None:
        self._note("accepted", turn_id, prompt.text if prompt is not None else None)

    def steered(self, turn_id: int, text: str, interrupt: bool) -> None:
        self._note("steered", turn_id, text, interrupt)

    def ended(self, turn_id: int, status: str, final_message: str | None) -> None:
        self._note("ended", turn_id, status, final_message)

    def close(self) -> None:
        self._note("close")

    # -- the connection tap ------------------------------------------------------------

    def websocket_opened(self, url: str, purpose: str, request_headers: Sequence[tuple[str, str]],
                         response_headers: Mapping[str, str]) -> Notes:
        self._note("ws.open", purpose, dict(request_headers).get("session-id"))
        return self

    def websocket_failed(self, url: str, purpose: str, error: ResponsesError, response: Answer | None) -> None:
        self._note("ws.error", purpose, error.status, response.body if response is not None else None)

    def request_opened(self, url: str, headers: Sequence[tuple[str, str]], body: dict[str, Any]) -> Notes:
        self._note("http.request", body["input"][-1]["content"][0]["text"])
        return self

    def sent(self, message: str) -> None:
        self._note("sent")

    def received(self, message: str | bytes) -> None:
        self._note("received")

    def closed(self, error: BaseException | None = None, *, by_server: bool = False, code: int | None = None,
               reason: str | None = None) -> None:
        self._note("closed")

    def head(self, status: int, headers: list[tuple[str, str]], error_body: str | None) -> None:
        self._note("head", status)

    def body_ended(self, error: BaseException | None) -> None:
        self._note("body_ended", error)


class RecordingAddOn:
    """An add-on for configs with ``session_id`` starting ``observed`` (as tracing answers
    ``tracing=``): one attachment per tree, one ``Notes`` per agent."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.fail_on = fail_on

    def open(self, config: ta.AgentConfig) -> RecordingAddOn | None:
        if not config.session_id.startswith("observed"):
            return None
        self.log.append(("open", config.session_id))
        return self

    def observe(self, site: AgentSite) -> Notes:
        return Notes(site, self.log, self.fail_on)

    def close(self) -> None:
        self.log.append(("tree closed",))

    def of(self, what: str, path: str = "/root") -> list[tuple[Any, ...]]:
        return [note[2:] for note in self.log if note[0] == what and note[1] == path]


@pytest.fixture
def addon(monkeypatch: pytest.MonkeyPatch) -> RecordingAddOn:
    installed = RecordingAddOn()
    monkeypatch.setattr(_observers, "_ADDONS", [*_observers._ADDONS, installed])
    return installed


async def test_an_add_on_sees_a_tree_through_the_seam_over_websocket(
    server: FakeResponsesServer, workspace: Path, addon: RecordingAddOn
) -> None:
    steer_now, answer_now = trio.Event(), trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.response_created("resp-1"))
        steer_now.set()
        await answer_now.wait()
        await conn.send_final("resp-1", "first")
        await conn.next_request()  # the steer joins the next request
        await conn.send_final("resp-2", "done")
        fork = await server.accept()  # the fork's own socket, no warmup
        await fork.next_request()
        await fork.send_final("resp-3", "forked")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, session_id="observed-ws",
                                             prompt_cache_key="model-test")) as agent:
            turn = await agent.prompt("hello")
            await steer_now.wait()
            await turn.steer("and more")
            answer_now.set()
            assert (await turn.result()).final_message == "done"
            async with agent.fork() as fork:
                assert (await (await fork.prompt("branch")).result()).final_message == "forked"
    assert addon.log[0] == ("open", "observed-ws")
    assert addon.log[-1] == ("tree closed",)  # after every agent of the tree closed
    assert [note for note in addon.log if note[0] == "observe"] == [
        ("observe", "/root", "root"), ("observe", "/root/fork-1", "fork"),
    ]
    assert addon.of("accepted") == [(1, "hello")]
    assert addon.of("steered") == [(1, "and more", False)]
    assert addon.of("ended") == [(1, "completed", "done")]
    assert addon.of("event") == [("run.started",), ("run.completed",)]
    assert addon.of("ws.open") == [("initial", "observed-ws")]
    assert len(addon.of("sent")) == 3  # the warmup, the prompt, the request with the steer
    assert addon.of("ended", "/root/fork-1") == [(1, "completed", "forked")]
    assert addon.of("ws.open", "/root/fork-1") and addon.of("close", "/root/fork-1") == [()]
    assert addon.of("closed") == [()] and addon.of("close") == [()]


async def test_an_add_on_taps_each_https_request(
    server: FakeResponsesServer, workspace: Path, addon: RecordingAddOn
) -> None:
    async def script() -> None:
        await (await server.accept_http()).send_final("resp-1", "over https")

    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS,
                             api_base_url=server.http_base_url)
    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, session_id="observed-https",
                                             responses=responses)) as agent:
            assert (await (await agent.prompt("hi")).result()).final_message == "over https"
    taps = [note[0] for note in addon.log if note[0] in ("http.request", "head", "received", "body_ended",
                                                          "closed")]
    assert taps[:2] == ["http.request", "head"] and taps[-2:] == ["body_ended", "closed"]
    assert set(taps[2:-2]) == {"received"}
    assert addon.of("http.request") == [("hi",)] and addon.of("head") == [(200,)]
    assert addon.of("body_ended") == [(None,)]  # read to its end before the turn's end (a tapped transport)
    assert addon.of("ended") == [(1, "completed", "over https")]


async def test_a_failed_handshake_reaches_the_tap_with_the_servers_answer(
    server: FakeResponsesServer, workspace: Path, addon: RecordingAddOn, autojump_clock: object
) -> None:
    async def script() -> None:
        await (await server.accept_raw()).reject(429, '{"error": {"message": "slow down"}}', [("Retry-After", "1")])
        conn = await server.accept()
        await conn.next_request()
        await conn.send_final("resp-1", "finally")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, session_id="observed-rejected")) as agent:
            assert (await (await agent.prompt("hello")).result()).final_message == "finally"
    assert addon.of("ws.error") == [("initial", 429, '{"error": {"message": "slow down"}}')]
    assert addon.of("ws.open") == [("warmup_fallback", "observed-rejected")]


async def test_an_observer_that_raises_is_dropped_and_the_agent_goes_on(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    addon = RecordingAddOn(fail_on="event")
    monkeypatch.setattr(_observers, "_ADDONS", [*_observers._ADDONS, addon])

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "fine")

    with pytest.warns(RuntimeWarning, match="trio_agent: the test observer stopped for agent session observed-x"):
        async with scripted(script):
            async with ta.open_agent(make_config(server, workspace, session_id="observed-x",
                                                 prompt_cache_key="model-test")) as agent:
                assert (await (await agent.prompt("go")).result()).final_message == "fine"
    assert addon.of("accepted") == [(1, "go")]  # told before its first event failed
    assert addon.of("ended") == [] and addon.of("close") == []  # dropped: told nothing more


async def test_an_agent_no_add_on_attaches_to_has_no_observers(
    server: FakeResponsesServer, workspace: Path, addon: RecordingAddOn
) -> None:
    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-1", "plain")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            assert type(agent._sink) is EventSink
            assert len(agent._parts.observers) == 0
            assert (await (await agent.prompt("go")).result()).final_message == "plain"
    assert addon.log == []


class KindsNotes(Notes):
    """A ``Notes`` that asks only for the turn's start and end (``kinds``), noting every
    event it is given."""

    kinds = frozenset({ta.EventKind.RUN_STARTED, ta.EventKind.RUN_COMPLETED})

    def on_event(self, event: ta.AgentEvent) -> None:
        self._note("event", event.kind.value)


class EveryEvent(Notes):
    """A ``Notes`` without ``kinds``: it notes every event it is given."""

    def on_event(self, event: ta.AgentEvent) -> None:
        self._note("event", event.kind.value)


async def _watch_a_turn(server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch,
                        narrow_notes: type[Notes], broad_notes: type[Notes]) -> tuple[RecordingAddOn, RecordingAddOn]:
    """One streamed turn watched by two add-ons' observers; their logs."""
    narrow, broad = RecordingAddOn(), RecordingAddOn()
    monkeypatch.setattr(narrow, "observe", lambda site: narrow_notes(site, narrow.log, None))
    monkeypatch.setattr(broad, "observe", lambda site: broad_notes(site, broad.log, None))
    monkeypatch.setattr(_observers, "_ADDONS", [*_observers._ADDONS, narrow, broad])

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_all([frames.response_created("resp-1"), frames.text_delta(0, "fi")])
        await conn.send_final("resp-1", "fine")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, session_id="observed-kinds",
                                             prompt_cache_key="model-test")) as agent:
            assert (await (await agent.prompt("go")).result()).final_message == "fine"
    return narrow, broad


async def test_an_observer_is_given_only_the_kinds_it_asks_for(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AgentObserver.kinds``: the text deltas, frames and model events of a turn never
    reach an observer that did not ask for them, while one without ``kinds`` beside it
    still sees every event."""
    narrow, broad = await _watch_a_turn(server, workspace, monkeypatch, KindsNotes, EveryEvent)
    assert narrow.of("event") == [("run.started",), ("run.completed",)]
    everything = [kind for (kind,) in broad.of("event")]
    assert {"assistant.delta", "api.event", "model.call.completed"} <= set(everything)
    assert everything.index("run.started") < everything.index("assistant.delta") < everything.index("run.completed")


class FrameNotes(Notes):
    """A ``Notes`` that asks for the frames (``api.event``) that end a response, noting
    the type of every frame it is given."""

    kinds = frozenset({ta.EventKind.API_EVENT})
    api_frames = frozenset({"response.completed"})

    def on_event(self, event: ta.AgentEvent) -> None:
        frame = event.payload["event"]
        self._note("frame", frame.get("type") if isinstance(frame, dict) else None)


class EveryFrame(Notes):
    """A ``Notes`` given every frame: it notes each one's type."""

    kinds = frozenset({ta.EventKind.API_EVENT})

    def on_event(self, event: ta.AgentEvent) -> None:
        frame = event.payload["event"]
        self._note("frame", frame.get("type") if isinstance(frame, dict) else None)


async def test_an_observer_is_given_only_the_frames_it_asks_for(
    server: FakeResponsesServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AgentObserver.api_frames``: of the ``api.event`` frames, the streamed ones never
    reach an observer that names only the response's end, while one beside it that
    names none sees every frame, in both directions."""
    narrow, broad = await _watch_a_turn(server, workspace, monkeypatch, FrameNotes, EveryFrame)
    # The warmup's answer and the turn's.
    assert narrow.of("frame") == [("response.completed",), ("response.completed",)]
    everything = {frame_type for (frame_type,) in broad.of("frame")}
    assert {"response.create", "response.created", "response.output_text.delta", "response.completed"} <= everything
