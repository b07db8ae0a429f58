"""Agents that talk to each other: sub-agent mail (``post_to_parent``) and
``collaboration.wait_agent``; the worker tools are in ``test_workers``.

The port of the codex seed ``steer_interrupts_wait_agent_and_is_sent_in_follow_up_request``
(``/work/shared/seeds/codex_pending_input_tests.rs.txt``; codex.md 3.2, 3.7) comes first.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

from .._helpers import user_texts
from ..conftest import EventLog, make_config, scripted, warm

NAMESPACE = "collaboration"


def collab_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return frames.function_call(call_id, name, raw, namespace=NAMESPACE)


def agent_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``agent_message`` items of a request, without their client item ids."""
    return [{k: v for k, v in item.items() if k != "id"} for item in body["input"]
            if item.get("type") == "agent_message"]


def mail(author: str, recipient: str, text: str) -> dict[str, Any]:
    return {"type": "agent_message", "author": author, "recipient": recipient,
            "content": [{"type": "input_text", "text": text}]}


def output_of(body: dict[str, Any], call_id: str) -> str:
    (item,) = [i for i in body["input"] if i.get("type") == "function_call_output" and i.get("call_id") == call_id]
    return str(item["output"])


def config(server: FakeResponsesServer, workspace: Path, tools: ta.Tools | None = None, **kw: Any) -> ta.AgentConfig:
    return make_config(server, workspace, tools=tools or ta.Tools.default().with_collaboration(), **kw)


def watcher(logs: dict[str, EventLog], *, shield: bool = False) -> Callable[[ta.Agent], Awaitable[None]]:
    """A ``watch`` hook that records every worker's events under its path. A cancelled
    parent cancels its watchers too; ``shield`` keeps this one reading until the
    worker's events end (they do: a cancelled worker closes within its grace)."""

    async def watch(worker: ta.Agent) -> None:
        logs[worker.path] = log = EventLog()
        with trio.CancelScope(shield=shield):
            await log.consume(worker.events)

    return watch


async def warm_worker(server: FakeResponsesServer) -> tuple[FakeConnection, dict[str, Any]]:
    """Accept a worker's socket, answer its warmup; returns it with its first request."""
    conn = await server.accept()
    warmup = await conn.next_request()
    assert warmup["generate"] is False
    await conn.send_warmup("resp-worker-warmup")
    return conn, await conn.next_request()


# -- the seed ---------------------------------------------------------------------------

WAIT_CALL_ID = "wait-call"
INITIAL_PROMPT = "wait for an agent"
STEER_PROMPT = "stop waiting and continue"


async def test_steer_interrupts_wait_agent_and_is_sent_in_follow_up_request(
    server: FakeResponsesServer, workspace: Path
) -> None:
    # The seed's streaming server is stateless HTTP with store: false, so its follow-up
    # request carries the whole history. Here: the WebSocket with History.FULL_REPLAY,
    # whose follow-up request carries the same items (after the warmup the seed lacks).
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        conn = await warm(server)
        bodies.append(await conn.next_request())
        await conn.send_all([
            frames.response_created("resp-1"),
            frames.completed("resp-1", [collab_call(WAIT_CALL_ID, "wait_agent", '{"timeout_ms":10000}')]),
        ])
        bodies.append(await conn.next_request())
        await conn.send_all([frames.response_created("resp-2"), frames.completed("resp-2", [])])

    log = EventLog()
    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, history=ta.History.FULL_REPLAY)
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace, responses=responses)) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt(INITIAL_PROMPT)
        # codex waits for CollabWaitingBegin; here the wait's tool.progress says it began.
        await log.wait_for(lambda e: e.kind.value == "tool.progress" and e.payload["tool"] == "wait_agent")
        await turn.steer(STEER_PROMPT)
        await turn.result()
    assert len(bodies) == 2
    second = bodies[1]
    relevant = [text for text in user_texts(second) if text in (INITIAL_PROMPT, STEER_PROMPT)]
    assert relevant == [INITIAL_PROMPT, STEER_PROMPT]
    assert json.loads(output_of(second, WAIT_CALL_ID)) == {"message": "Wait interrupted by new input.",
                                                           "timed_out": False}


# -- sub-agent mail -------------------------------------------------------------------------


async def test_a_child_and_its_parent_mail_each_other(server: FakeResponsesServer, workspace: Path) -> None:
    """Triggering mail both ways: each starts a turn whose first request carries it as an
    ``agent_message`` from the sender's path to the recipient's."""
    root_bodies: list[dict[str, Any]] = []
    child_bodies: list[dict[str, Any]] = []

    async def script() -> None:
        root = await warm(server)
        child, first = await warm_worker(server)
        child_bodies.append(first)
        await child.send_final("resp-child", "noted")
        root_bodies.append(await root.next_request())
        await root.send_final("resp-root", "thanks")

    async with scripted(script), ta.open_agent(config(server, workspace)) as agent:
        async with agent.spawn("worker") as child:
            assert (agent.path, child.path) == ("/root", "/root/worker")
            to_child = await child.post_mail(agent.path, "please check the tests", trigger_turn=True)
            assert to_child is not None and (await to_child.result()).final_message == "noted"
            to_parent = await child.post_to_parent("the tests pass", trigger_turn=True)
            assert to_parent is not None and (await to_parent.result()).final_message == "thanks"
    assert agent_messages(child_bodies[0]) == [mail("/root", "/root/worker", "please check the tests")]
    assert agent_messages(root_bodies[0]) == [mail("/root/worker", "/root", "the tests pass")]


async def test_a_child_spawned_by_a_tool_reports_to_its_parent_through_its_handle(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """``AgentHandle.spawn`` in a root tool; the child's own tool calls
    ``ctx.agent.post_to_parent``: queue-only mail that joins the root's next request,
    after the output of the tool that is still running."""
    paths: list[str] = []

    async def delegate(ctx: ta.ToolContext, args: Any) -> str:
        async with ctx.agent.spawn("helper") as helper:
            return (await (await helper.prompt(args["task"])).result()).final_message

    async def report(ctx: ta.ToolContext, args: Any) -> str:
        paths.append(ctx.agent.path)
        await ctx.agent.post_to_parent(args["finding"])
        return "reported"

    schema = {"type": "object", "properties": {}}
    tools = (ta.Tools.default().function("delegate", "Delegate a task.", schema, delegate)
             .function("report", "Report to the parent.", schema, report))
    follow_up: list[dict[str, Any]] = []

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_tool_call("resp-1", "delegate-1", "delegate", {"task": "find the bug"})
        helper, first = await warm_worker(server)
        assert user_texts(first)[-1] == "find the bug"
        await helper.send_tool_call("resp-h1", "report-1", "report", {"finding": "it is in parse()"})
        assert output_of(await helper.next_request(), "report-1") == "reported"
        await helper.send_final("resp-h2", "fixed")
        follow_up.append(await root.next_request())
        await root.send_final("resp-2")

    async with scripted(script), ta.open_agent(make_config(server, workspace, tools=tools)) as agent:
        await (await agent.prompt("fix it")).result()
    assert paths == ["/root/helper"]
    (body,) = follow_up
    assert [item["type"] for item in body["input"]] == ["function_call_output", "agent_message"]
    assert output_of(body, "delegate-1") == "fixed"
    assert agent_messages(body) == [mail("/root/helper", "/root", "it is in parse()")]


async def test_post_to_parent_needs_a_parent_that_is_open(server: FakeResponsesServer, workspace: Path) -> None:
    warmed = trio.Event()

    async def script() -> None:
        await warm(server)
        await warm_worker_no_turn(server)
        warmed.set()

    async with scripted(script), ta.open_agent(config(server, workspace)) as agent:
        with pytest.raises(ta.InvalidPrompt, match="no parent"):
            await agent.post_to_parent("hello?")
        async with agent.spawn() as child:
            assert child.path == "/root/child-1"
            await warmed.wait()
    with pytest.raises(ta.AgentClosed, match="/root has closed"):
        await child.post_to_parent("too late")


async def warm_worker_no_turn(server: FakeResponsesServer) -> None:
    conn = await server.accept()
    await conn.next_request()
    await conn.send_warmup("resp-child-warmup")


# -- wait_agent -------------------------------------------------------------------------------


async def test_a_childs_mail_completes_wait_agent_and_joins_the_next_request(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    bodies: list[dict[str, Any]] = []

    async def script() -> None:
        root = await warm(server)
        await warm_worker_no_turn(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("w1", "wait_agent", {})])
        bodies.append(await root.next_request())
        await root.send_final("resp-2")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        async with agent.spawn("worker") as child:
            turn = await agent.prompt("wait for the worker")
            await log.wait_for(lambda e: e.kind.value == "tool.progress" and e.payload["tool"] == "wait_agent")
            start = trio.current_time()
            await child.post_to_parent("worker completed")  # queue-only
            await turn.result()
            assert trio.current_time() == start  # no timeout ran out
    (body,) = bodies
    assert json.loads(output_of(body, "w1")) == {"message": "Wait completed.", "timed_out": False}
    assert agent_messages(body) == [mail("/root/worker", "/root", "worker completed")]
    assert log.payloads("tool.progress")[0]["message"] == f"waiting up to {30_000} ms for mail"


@pytest.mark.parametrize(
    ("arguments", "waited", "expected"),
    [
        ({}, 30.0, {"message": "Wait timed out.", "timed_out": True}),
        ({"timeout_ms": 2_500}, 2.5, {"message": "Wait timed out.", "timed_out": True}),
        ({"timeout_ms": 3_600_000}, 3600.0, {"message": "Wait timed out.", "timed_out": True}),
        ({"timeout_ms": 10}, 1.0, {"message": "Wait timed out.\n\nThe requested timeout_ms 10 is below the minimum; "
                                              "waited up to 1000 ms instead.", "timed_out": True}),
    ],
)
async def test_wait_agent_times_out_on_trios_clock_clamped_to_its_minimum(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock,
    arguments: dict[str, Any], waited: float, expected: dict[str, Any],
) -> None:
    outputs: list[str] = []

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("w1", "wait_agent", arguments)])
        outputs.append(output_of(await root.next_request(), "w1"))
        await root.send_final("resp-2")

    start = trio.current_time()
    async with scripted(script, 7200), ta.open_agent(config(server, workspace)) as agent:
        await (await agent.prompt("wait")).result()
    assert trio.current_time() - start == pytest.approx(waited, abs=1e-9)
    assert [json.loads(out) for out in outputs] == [expected]


@pytest.mark.parametrize(("waiting", "message"), [("mail", "Wait completed."),
                                                  ("steer", "Wait interrupted by new input.")])
async def test_wait_agent_returns_at_once_when_input_already_waits(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock, waiting: str, message: str
) -> None:
    outputs: list[str] = []
    asked = trio.Event()
    posted = trio.Event()

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        asked.set()
        await posted.wait()  # the input now waits, before the response with the wait arrives
        await root.send_completed("resp-1", [collab_call("w1", "wait_agent", {"timeout_ms": 60_000})])
        outputs.append(output_of(await root.next_request(), "w1"))
        await root.send_final("resp-2")

    async with scripted(script) as nursery, ta.open_agent(config(server, workspace)) as agent:
        nursery.start_soon(EventLog().consume, agent.events)
        turn = await agent.prompt("go")
        await asked.wait()
        if waiting == "mail":
            await agent.post_mail("/root/worker", "already here")
        else:
            await turn.steer("already here")
        posted.set()
        start = trio.current_time()
        await turn.result()
        assert trio.current_time() == start
    assert json.loads(outputs[0]) == {"message": message, "timed_out": False}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"timeout_ms": 3_600_001},
         "collaboration.wait_agent timeout_ms must be at most 3600000 (1 hour), got 3600001"),
        ({"timeout_ms": "10"}, 'collaboration.wait_agent timeout_ms must be a whole number of milliseconds, got "10"'),
        ({"timeout_ms": 1.5}, "collaboration.wait_agent timeout_ms must be a whole number of milliseconds, got 1.5"),
        ({"targets": ["a"]}, "collaboration.wait_agent takes only timeout_ms; unknown field(s): targets"),
        ("[1]", 'collaboration.wait_agent takes a JSON object such as {"timeout_ms": 30000}'),
    ],
)
async def test_bad_wait_agent_arguments_are_failed_outputs(
    server: FakeResponsesServer, workspace: Path, arguments: dict[str, Any] | str, expected: str
) -> None:
    outputs: list[str] = []

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("w1", "wait_agent", arguments)])
        outputs.append(output_of(await root.next_request(), "w1"))
        await root.send_final("resp-2")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("wait")).result()
    assert outputs == [expected]
    assert [p["status"] for p in log.payloads("tool.result")] == ["failed"]


async def test_the_collaboration_group_is_a_namespace_tool(server: FakeResponsesServer, workspace: Path) -> None:
    checked = trio.Event()

    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        namespaces = [t for t in warmup["input"][0]["tools"] if t.get("type") == "namespace"]
        assert [(n["name"], [t["name"] for t in n["tools"]]) for n in namespaces] == [
            ("clock", ["sleep"]), ("collaboration", ["wait_agent"]),
        ]
        await conn.send_warmup("resp-warmup")
        checked.set()

    tools = ta.Tools.default().with_clock().with_collaboration(max_workers=0)  # wait_agent only
    async with scripted(script), ta.open_agent(config(server, workspace, tools)):
        await checked.wait()


def test_with_collaboration_checks_its_settings() -> None:
    with pytest.raises(ta.ConfigError, match="max_workers"):
        ta.Tools.default().with_collaboration(max_workers=65)
    with pytest.raises(ta.ConfigError, match="max_depth"):
        ta.Tools.default().with_collaboration(max_depth=0)
    tools = ta.Tools.default().with_collaboration()
    (group,) = [t for t in tools.definitions() if t.get("type") == "namespace"]
    assert [t["name"] for t in group["tools"]] == [
        "spawn_agent", "send_input", "send_message", "followup_task", "wait_agent", "close_agent"]
