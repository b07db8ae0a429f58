"""Agents that talk to each other: sub-agent mail, ``collaboration.wait_agent`` and the
multi-agent tools (``spawn_agent``, ``send_input``, ``close_agent``).

The port of the codex seed ``steer_interrupts_wait_agent_and_is_sent_in_follow_up_request``
(``/work/shared/seeds/codex_pending_input_tests.rs.txt``; codex.md 3.2, 3.7) comes first;
the rest specifies the worker tools end to end against one ``FakeResponsesServer``: the
parent and every worker on their own connection, a worker's connection recognised by
the task in its first request.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed

import trio_agent as ta
from trio_agent.testing import FakeConnection, FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm

NAMESPACE = "collaboration"


def collab_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return frames.function_call(call_id, name, raw, namespace=NAMESPACE)


def user_texts(body: dict[str, Any]) -> list[str]:
    return [part["text"] for item in body["input"]
            if item.get("type") == "message" and item.get("role") == "user"
            for part in item["content"] if part.get("type") == "input_text"]


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
    responses = ta.Responses(websocket_url=server.url, history=ta.History.FULL_REPLAY)
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
    assert [t["name"] for t in group["tools"]] == ["spawn_agent", "send_input", "wait_agent", "close_agent"]


# -- workers ----------------------------------------------------------------------------------

TASKS = {"review the parser": "a", "review the lexer": "b"}


async def test_a_parent_runs_two_workers_in_parallel_and_gets_their_answers_as_mail(
    server: FakeResponsesServer, workspace: Path
) -> None:
    released = {"a": trio.Event(), "b": trio.Event()}
    worker_requests: dict[str, dict[str, Any]] = {}
    bodies: list[dict[str, Any]] = []

    async def serve_worker(conn: FakeConnection, first: dict[str, Any]) -> None:
        name = TASKS[user_texts(first)[-1]]
        worker_requests[name] = first
        await released[name].wait()
        await conn.send_final(f"resp-{name}", f"answer from {name}")

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [
            collab_call("spawn-a", "spawn_agent", {"name": "a", "task": "review the parser"}),
            collab_call("spawn-b", "spawn_agent", {"name": "b", "task": "review the lexer"}),
        ])
        async with trio.open_nursery() as workers:
            for _ in range(2):
                workers.start_soon(serve_worker, *await warm_worker(server))
            bodies.append(await root.next_request())
            await root.send_completed("resp-2", [collab_call("wait-1", "wait_agent", {})])
            released["a"].set()
            bodies.append(await root.next_request())
            await root.send_completed("resp-3", [collab_call("wait-2", "wait_agent", {})])
            released["b"].set()  # only now: its answer cannot reach the previous request
            bodies.append(await root.next_request())
            await root.send_final("resp-4", "both reviews are in")

    logs: dict[str, EventLog] = {}
    tools = ta.Tools.default().with_collaboration(watch=watcher(logs))
    async with scripted(script), ta.open_agent(config(server, workspace, tools)) as agent:
        assert (await (await agent.prompt("review the front end")).result()).final_message == "both reviews are in"
    spawned, first_answer, second_answer = bodies
    assert [json.loads(output_of(spawned, f"spawn-{n}"))["path"] for n in "ab"] == ["/root/a", "/root/b"]
    assert json.loads(output_of(spawned, "spawn-a"))["status"] == "running"
    assert json.loads(output_of(first_answer, "wait-1")) == {"message": "Wait completed.", "timed_out": False}
    assert agent_messages(first_answer) == [mail("/root/a", "/root", "answer from a")]
    assert json.loads(output_of(second_answer, "wait-2")) == {"message": "Wait completed.", "timed_out": False}
    assert agent_messages(second_answer) == [mail("/root/b", "/root", "answer from b")]
    # Each worker is a clean child: it warmed up on its own and got its task as prompt.
    for name, task in (("a", "review the parser"), ("b", "review the lexer")):
        assert user_texts(worker_requests[name])[-1] == task
        assert worker_requests[name]["previous_response_id"] == "resp-worker-warmup"
    # The workers were closed with the parent (their event streams ended) after a completed turn.
    for path in ("/root/a", "/root/b"):
        assert [p["status"] for p in logs[path].payloads("run.completed")] == ["completed"]
        assert logs[path].payloads("run.failed") == []


async def test_close_agent_cancels_a_busy_worker(server: FakeResponsesServer, workspace: Path) -> None:
    outputs: list[str] = []

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("spawn", "spawn_agent", {"name": "slow", "task": "dig"})])
        await root.next_request()
        worker, _ = await warm_worker(server)  # its turn is running now; it is never answered
        await root.send_completed("resp-2", [collab_call("close", "close_agent", {"name": "slow"})])
        outputs.append(output_of(await root.next_request(), "close"))
        with pytest.raises(ConnectionClosed):  # the cancelled worker abandoned its socket
            await worker.next_request()
        await root.send_final("resp-3")

    logs: dict[str, EventLog] = {}
    tools = ta.Tools.default().with_collaboration(watch=watcher(logs))
    async with scripted(script), ta.open_agent(config(server, workspace, tools)) as agent:
        await (await agent.prompt("start and stop a worker")).result()
        # close_agent returned only once the worker had closed: its events have ended.
        worker_log = logs["/root/slow"]
        assert [p["status"] for p in worker_log.payloads("run.failed")] == ["cancelled"]
        assert worker_log.kinds()[-1] == "run.failed"
    assert json.loads(outputs[0]) == {"name": "slow", "path": "/root/slow", "status": "closed",
                                      "previous_status": "running"}


@pytest.mark.parametrize("how", ["close", "cancel"])
async def test_workers_close_with_their_parent(server: FakeResponsesServer, workspace: Path, how: str) -> None:
    """Leaving the parent's block (or cancelling it) cancels its busy worker: nothing
    the parent started outlives it."""
    worker_busy = trio.Event()
    dropped = trio.Event()

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("spawn", "spawn_agent", {"name": "slow", "task": "dig"})])
        await root.next_request()
        worker, _ = await warm_worker(server)
        worker_busy.set()
        if how == "close":  # else the test cancels the parent while this request is open
            await root.send_final("resp-2", "leaving the worker behind")
        with pytest.raises(ConnectionClosed):  # the cancelled worker abandons its socket
            await worker.next_request()
        dropped.set()

    logs: dict[str, EventLog] = {}
    tools = ta.Tools.default().with_collaboration(watch=watcher(logs, shield=True))
    async with scripted(script):
        with trio.CancelScope() as scope:
            async with ta.open_agent(config(server, workspace, tools)) as agent:
                turn = await agent.prompt("start a worker")
                await worker_busy.wait()
                if how == "cancel":
                    scope.cancel()
                await turn.result()
        assert scope.cancelled_caught == (how == "cancel")
        await dropped.wait()
    worker_log = logs["/root/slow"]
    assert [p["status"] for p in worker_log.payloads("run.failed")] == ["cancelled"]
    assert worker_log.kinds()[-1] == "run.failed"


async def test_send_input_starts_a_turn_of_an_idle_worker_and_steers_a_busy_one(
    server: FakeResponsesServer, workspace: Path
) -> None:
    bodies: list[dict[str, Any]] = []
    worker_bodies: list[dict[str, Any]] = []
    second_turn_running = trio.Event()
    answer_first = trio.Event()
    released = trio.Event()

    async def serve_worker(conn: FakeConnection, first: dict[str, Any]) -> None:
        await answer_first.wait()  # not before the parent's request with the spawn output went out
        await conn.send_final("resp-w1", "first answer")
        worker_bodies.append(await conn.next_request())  # send_input while idle: a new turn
        second_turn_running.set()
        await released.wait()
        await conn.send_final("resp-w2", "second answer")
        worker_bodies.append(await conn.next_request())  # the steer joins the same turn
        await conn.send_final("resp-w3", "third answer")

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("spawn", "spawn_agent", {"name": "w", "task": "start"})])
        async with trio.open_nursery() as workers:
            workers.start_soon(serve_worker, *await warm_worker(server))
            await root.next_request()
            answer_first.set()
            await root.send_completed("resp-2", [collab_call("wait-1", "wait_agent", {})])
            bodies.append(await root.next_request())
            await root.send_completed("resp-3", [collab_call("more", "send_input", {"name": "w", "text": "more"})])
            await second_turn_running.wait()
            bodies.append(await root.next_request())
            await root.send_completed("resp-4", [collab_call("steer", "send_input", {"name": "w", "text": "and this"})])
            bodies.append(await root.next_request())
            released.set()
            await root.send_completed("resp-5", [collab_call("wait-2", "wait_agent", {})])
            bodies.append(await root.next_request())
            await root.send_final("resp-6")

    async with scripted(script), ta.open_agent(config(server, workspace)) as agent:
        await (await agent.prompt("use a worker")).result()
    first, started, steered, last = bodies
    assert agent_messages(first) == [mail("/root/w", "/root", "first answer")]
    assert json.loads(output_of(started, "more"))["delivered"] == "new_turn"
    assert json.loads(output_of(steered, "steer"))["delivered"] == "joined_running_turn"
    assert user_texts(worker_bodies[0])[-1] == "more"
    assert user_texts(worker_bodies[1])[-1] == "and this"
    # One mail per worker turn: the steered turn reports its last answer only.
    assert agent_messages(last) == [mail("/root/w", "/root", "third answer")]


async def test_worker_tool_mistakes_are_failed_outputs(server: FakeResponsesServer, workspace: Path) -> None:
    outputs: dict[str, str] = {}
    worker_outputs: list[str] = []
    calls = [
        collab_call("ok", "spawn_agent", {"name": "a", "task": "task a"}),
        collab_call("duplicate", "spawn_agent", {"name": "a", "task": "again"}),
        collab_call("too-many", "spawn_agent", {"name": "b", "task": "task b"}),
        collab_call("bad-name", "spawn_agent", {"name": "bad name", "task": "x"}),
        collab_call("no-task", "spawn_agent", {"name": "c"}),
        collab_call("unknown-send", "send_input", {"name": "zz", "text": "hi"}),
        collab_call("unknown-close", "close_agent", {"name": "zz"}),
        collab_call("not-an-object", "close_agent", "[]"),
    ]

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", calls)
        worker, _ = await warm_worker(server)
        await worker.send_completed("resp-w1", [collab_call("nested", "spawn_agent", {"name": "sub", "task": "x"})])
        worker_outputs.append(output_of(await worker.next_request(), "nested"))
        await worker.send_final("resp-w2", "done a")
        body = await root.next_request()
        outputs.update({call["call_id"]: output_of(body, call["call_id"]) for call in calls})
        await root.send_final("resp-2")

    log = EventLog()
    tools = ta.Tools.default().with_collaboration(max_workers=1)
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace, tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("misuse the tools")).result()
    assert json.loads(outputs.pop("ok"))["path"] == "/root/a"
    assert outputs == {
        "duplicate": "collaboration.spawn_agent: a worker named 'a' already exists (/root/a); use send_input to give "
                     "it more work, close_agent it first, or pick another name",
        "too-many": "collaboration.spawn_agent: this agent already runs 1 workers (a), the most it may; "
                    "close_agent one first",
        "bad-name": "collaboration.spawn_agent: a worker name is letters, digits, '_' or '-' (1-64 characters), "
                    'got "bad name"',
        "no-task": "collaboration.spawn_agent needs task, a non-empty string, got null",
        "unknown-send": "collaboration.send_input: no worker named 'zz' (workers: a)",
        "unknown-close": "collaboration.close_agent: no worker named 'zz' (workers: a)",
        "not-an-object": "collaboration.close_agent takes a JSON object with name",
    }
    assert [p["status"] for p in log.payloads("tool.result")] == ["completed"] + ["failed"] * 7
    assert worker_outputs == ["collaboration.spawn_agent: /root/a is itself a worker; workers may only be "
                              "spawned up to 1 level(s) below /root"]


async def test_a_worker_that_cannot_start_is_a_failed_output(server: FakeResponsesServer, workspace: Path) -> None:
    outputs: list[str] = []

    def factory(handle: ta.AgentHandle) -> Any:
        return ta.Tools.default().with_collaboration() if handle.path == "/root" else "not tools"

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("spawn", "spawn_agent", {"name": "a", "task": "x"})])
        outputs.append(output_of(await root.next_request(), "spawn"))
        await root.send_completed("resp-2", [collab_call("again", "spawn_agent", {"name": "a", "task": "x"})])
        outputs.append(output_of(await root.next_request(), "again"))  # the name is free again
        await root.send_final("resp-3")

    async with scripted(script), ta.open_agent(make_config(server, workspace, tools_factory=factory)) as agent:
        await (await agent.prompt("spawn")).result()
    assert outputs == ["collaboration.spawn_agent could not start worker 'a': tools_factory must return a ta.Tools"] * 2


async def test_triggering_worker_mail_starts_a_turn_of_an_idle_parent(
    server: FakeResponsesServer, workspace: Path
) -> None:
    bodies: list[dict[str, Any]] = []
    parent_idle = trio.Event()

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("spawn", "spawn_agent", {"name": "w", "task": "count"})])
        worker, _ = await warm_worker(server)
        await root.next_request()
        await root.send_final("resp-2", "the worker is counting")
        await parent_idle.wait()
        await worker.send_final("resp-w", "42")
        bodies.append(await root.next_request())
        await root.send_final("resp-3", "the worker says 42")

    log = EventLog()
    tools = ta.Tools.default().with_collaboration(trigger_turn=True)
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace, tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("count with a worker")).result()
        parent_idle.set()
        automatic = await log.wait_for(lambda e: e.kind.value == "run.completed" and e.turn_id == 2)
        assert automatic.payload["status"] == "completed"
    (body,) = bodies
    assert agent_messages(body) == [mail("/root/w", "/root", "42")]


async def test_a_worker_outlives_the_cancelled_turn_that_spawned_it(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """Workers belong to the agent, not to a turn: cancelling the spawning turn leaves
    the worker running, and its answer (triggering mail here) starts a turn later."""
    bodies: list[dict[str, Any]] = []
    spawned = trio.Event()
    cancelled = trio.Event()

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_completed("resp-1", [collab_call("spawn", "spawn_agent", {"name": "w", "task": "dig"})])
        worker, _ = await warm_worker(server)
        await root.next_request()  # the spawn output; never answered: the turn is cancelled
        spawned.set()
        await cancelled.wait()
        await worker.send_final("resp-w", "found it")
        fresh = await server.accept()  # a cancelled turn's socket is abandoned: the next turn replays
        bodies.append(await fresh.next_request())
        await fresh.send_final("resp-2", "the worker found it")

    log = EventLog()
    tools = ta.Tools.default().with_collaboration(trigger_turn=True)
    async with scripted(script) as nursery, ta.open_agent(config(server, workspace, tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("spawn a worker")
        await spawned.wait()
        await turn.cancel()
        cancelled.set()
        automatic = await log.wait_for(lambda e: e.kind.is_terminal and e.turn_id == 2)
        assert automatic.payload["status"] == "completed"
    (body,) = bodies
    assert agent_messages(body) == [mail("/root/w", "/root", "found it")]
