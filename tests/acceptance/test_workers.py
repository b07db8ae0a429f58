"""The multi-agent tools of the ``collaboration`` group: ``spawn_agent``, ``send_input``,
``close_agent`` (with ``wait_agent``), end to end against one ``FakeResponsesServer``:
the parent and every worker on their own connection, a worker's connection recognised
by the task in its first request (``warm_worker``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agent as ta
from trio_agent.testing import ClientDisconnected, FakeConnection, FakeResponsesServer

from ..conftest import EventLog, make_config, scripted, warm
from .test_collaboration import agent_messages, collab_call, config, mail, output_of, user_texts, warm_worker, watcher

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
        with pytest.raises(ClientDisconnected):  # the cancelled worker abandoned its socket
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
        with pytest.raises(ClientDisconnected):  # the cancelled worker abandons its socket
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
