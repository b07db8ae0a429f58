"""Fault matrix: hostile timing around the turn's one nursery (issue 30 item 4).

A turn runs in one nursery whose scope is its cancel scope; a step opens none and its
tool calls start in the turn's nursery. What that shape makes possible, each case with a
call still running, on both transports over real loopback sockets, deterministic (Trio's
events and ``wait_all_tasks_blocked``, no sleep):

- a failure that is not retried arrives while a streamed call runs: the failed
  attempt drains the call (awaited, not aborted) -- no terminal event before it ends --
  then the turn fails once, its call paired with the real output;
- a cancel while a failed attempt drains its call (retried or not): the turn ends
  cancelled once, the call paired once with an ``aborted`` output, no retry is sent;
- a bug in a step's body after the response committed, its call running: the call is
  cancelled and paired, the turn fails once, ungrouped (``internal error:
  RuntimeError(...)``), and the bug crashes the agent (once: a bug that is a group
  itself is not paired with itself); and when the agent is cancelled while a call's
  shielded cleanup holds the nursery open, the bug is still reported and escapes (it
  was lost: the turn's nursery raised the cancellation alone and the turn ended
  "cancelled");
- a tool that ignores the cancellation for a while (shielded cleanup): the turn's
  terminal event waits for it, and its call is answered once;
- a cancel during a mid-turn compaction (run in the turn's nursery after the step's
  call was recorded): cancelled once, the call kept with its real output once, one
  ``<turn_aborted>``, no summary installed;
- an interrupting steer while a streamed call runs: the cut response's call is drained
  with its real output before the steer joins (chained on the interrupted response);
  cancelled while that drain waits, the call is aborted once;
- a tool that raises or returns what no output holds (a set, bytes), started while its
  response streams: a failed output, the turn completes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._runtime._turns import _runner
from trio_agent.testing import FakeResponsesServer, frames

from .._streaming_model import TRANSPORTS, Model, Tool, calls_and_outputs, output_of, well_formed
from ..conftest import EventLog, scripted
from .test_streamed_call_faults import FINAL, IDS, A, history, prompts, terminals

NOT_RETRIED = [frames.error_frame("quota", code="insufficient_quota")]
RETRIED = [{"type": "response.failed", "response": {
    "id": "resp-1", "status": "failed", "error": {"code": "server_error", "message": "boom"}}}]


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in ``exc``, groups flattened."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


async def escaped(config: ta.AgentConfig, script: Callable[[], Awaitable[None]], log: EventLog,
                  block: Callable[[ta.Agent], Awaitable[None]]) -> BaseException:
    """What escapes the agent's ``block`` (a bug crashes the agent)."""
    async with scripted(script, 20) as nursery:
        try:
            async with ta.open_agent(config) as agent:
                nursery.start_soon(log.consume, agent.events)
                await block(agent)
        except BaseException as exc:
            return exc
    raise AssertionError("nothing escaped the agent")


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_failure_not_retried_awaits_the_running_call_then_fails_once(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    model, tool, log = Model(server, transport), Tool(held=True), EventLog()
    later: list[dict[str, Any]] = []
    seen_before_release: list[list[str]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await tool.started.wait()
        await model.end(NOT_RETRIED)
        await log.wait_for("model.attempt.failed")
        await trio.testing.wait_all_tasks_blocked()
        seen_before_release.append(terminals(log))  # the turn waits for its call
        tool.release.set()
        later.append(await model.next_request())
        await model.end([FINAL])

    failed, _ = await prompts(model, workspace, tool.tools(), script, log, "go", "again")

    assert seen_before_release == [[]]
    assert isinstance(failed, ta.TurnFailed) and isinstance(failed.responses_error, ta.UsageLimitExceeded)
    assert tool.finished == ["call-a"] and terminals(log) == ["failed", "completed"]
    assert [(p["call_id"], p["status"]) for p in log.payloads("tool.result")] == [("call-a", "completed")]
    [request] = later
    assert calls_and_outputs(request["input"]) == [("call", "call-a"), ("output", "call-a")]
    assert output_of(request["input"], "call-a") == ["done call-a"]


@pytest.mark.parametrize("failure", ["not_retried", "retried"])
@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_cancel_while_a_failed_attempt_drains_its_call(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, failure: str
) -> None:
    model, tool, log = Model(server, transport), Tool(held=True), EventLog()
    later: list[dict[str, Any]] = []
    cancel = trio.Event()

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await tool.started.wait()
        await model.end(NOT_RETRIED if failure == "not_retried" else RETRIED)
        await log.wait_for("model.attempt.failed")
        await trio.testing.wait_all_tasks_blocked()  # the attempt's drain waits for the held call
        cancel.set()
        later.append(await model.next_request())  # the next turn's: no retry was sent
        await model.end([FINAL])

    cancelled, done = await prompts(model, workspace, tool.tools(), script, log, "go", "again",
                                    cancel_first=cancel)

    assert isinstance(cancelled, ta.TurnCancelled) and terminals(log) == ["cancelled", "completed"]
    assert tool.calls == ["call-a"] and tool.finished == []
    assert not log.payloads("model.attempt.retrying") or failure == "retried"
    assert [(p["call_id"], p["status"]) for p in log.payloads("tool.result")] == [("call-a", "cancelled")]
    [request] = later
    items = request["input"]
    assert "go" in str(items) and "again" in str(items)  # the cancelled turn's prompt stays, once
    assert calls_and_outputs(items) == [("call", "call-a"), ("output", "call-a")]
    assert "aborted" in output_of(items, "call-a")[0]
    assert str(items).count("<turn_aborted>") == 1
    assert well_formed(history(done))


@pytest.mark.parametrize("grouped", [False, True], ids=["plain", "grouped"])
@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_bug_in_a_steps_body_cancels_its_running_call_and_fails_the_turn_once(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, monkeypatch: pytest.MonkeyPatch,
    grouped: bool,
) -> None:
    """``grouped``: the body raises a group itself (an inner nursery's bug): it escapes
    once, never paired with itself."""
    model, tool, log = Model(server, transport), Tool(held=True), EventLog()
    leaf = RuntimeError("a bug in a step")
    bug = ExceptionGroup("a grouped bug", [leaf]) if grouped else leaf

    def buggy_plan(**_: Any) -> Any:
        raise bug

    monkeypatch.setattr(_runner, "plan_next", buggy_plan)

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await tool.started.wait()
        await model.end([frames.completed("resp-1", [A])])

    async def block(agent: ta.Agent) -> None:
        await (await agent.prompt("go")).result()

    crash = await escaped(model.config(workspace, tools=tool.tools()), script, log, block)
    assert leaves(crash).count(leaf) == 1, repr(crash)  # the bug escapes, once
    assert terminals(log) == ["failed"]
    [message] = [p["message"] for p in log.payloads("run.error")]
    assert message == f"internal error: {bug!r}"  # ungrouped (unless it is a group itself)
    assert tool.calls == ["call-a"] and tool.finished == []  # cancelled, not awaited
    assert [(p["call_id"], p["status"]) for p in log.payloads("tool.result")] == [("call-a", "cancelled")]


class Stubborn:
    """A tool that, cancelled, keeps running in a shield until ``release`` (a process it
    must reap, say), then answers."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.cancelled = trio.Event()
        self.release = trio.Event()

    async def __call__(self, ctx: ta.ToolContext, args: Any) -> str:
        self.started.set()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                self.cancelled.set()
                await self.release.wait()
        return "unreachable"

    def tools(self) -> ta.Tools:
        return ta.Tools.default().function("work", "Does work.", {"type": "object"}, self)


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_tool_that_ignores_the_cancel_for_a_while_delays_the_terminal_event(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    model, tool, log = Model(server, transport), Stubborn(), EventLog()
    later: list[dict[str, Any]] = []
    cancel = trio.Event()
    seen_before_release: list[list[str]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await model.end([frames.completed("resp-1", [A])])
        await tool.started.wait()
        await trio.testing.wait_all_tasks_blocked()
        cancel.set()
        await tool.cancelled.wait()
        await trio.testing.wait_all_tasks_blocked()
        seen_before_release.append(terminals(log))
        tool.release.set()
        later.append(await model.next_request())
        await model.end([FINAL])

    cancelled, done = await prompts(model, workspace, tool.tools(), script, log, "go", "again",
                                    cancel_first=cancel)

    assert seen_before_release == [[]]  # the terminal event waits for the tool's cleanup
    assert isinstance(cancelled, ta.TurnCancelled) and terminals(log) == ["cancelled", "completed"]
    assert [(p["call_id"], p["status"]) for p in log.payloads("tool.result")] == [("call-a", "cancelled")]
    [request] = later
    assert calls_and_outputs(request["input"]) == [("call", "call-a"), ("output", "call-a")]
    assert "aborted" in output_of(request["input"], "call-a")[0]
    assert well_formed(history(done))


class Leave(Exception):
    """Raised out of the agent's block: the agent is cancelled (its turns with it)."""


@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_bug_in_a_steps_body_as_the_agent_is_cancelled_is_not_lost(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug cancels the turn's calls; a call's shielded cleanup holds the nursery
    open while the agent is cancelled too: the turn still fails with the bug (one
    terminal event) and the bug escapes, not a bare cancellation."""
    model, tool, log = Model(server, transport), Stubborn(), EventLog()

    def buggy_plan(**_: Any) -> Any:
        raise RuntimeError("a bug in a step")

    monkeypatch.setattr(_runner, "plan_next", buggy_plan)
    left = trio.Event()

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await model.end([frames.completed("resp-1", [A])])
        await left.wait()
        await trio.testing.wait_all_tasks_blocked()  # the agent's cancellation has reached the turn
        tool.release.set()

    async def block(agent: ta.Agent) -> None:
        await agent.prompt("go")
        await tool.cancelled.wait()  # the bug cancelled the call; its cleanup holds on
        await trio.testing.wait_all_tasks_blocked()
        left.set()
        raise Leave

    out = await escaped(model.config(workspace, tools=tool.tools()), script, log, block)
    assert sorted(type(leaf).__name__ for leaf in leaves(out)) == ["Leave", "RuntimeError"], repr(out)
    assert terminals(log) == ["failed"]
    assert [p["message"] for p in log.payloads("run.error")] == ["internal error: RuntimeError('a bug in a step')"]
    assert [(p["call_id"], p["status"]) for p in log.payloads("tool.result")] == [("call-a", "cancelled")]



@pytest.mark.parametrize("transport", TRANSPORTS, ids=IDS)
async def test_a_cancel_during_a_mid_turn_compaction_keeps_the_steps_calls_once(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    """The step's call ran and was recorded, then the usage triggers a compaction in the
    turn's nursery; cancelled there, the turn ends cancelled once and the next request
    carries the call with its real output once, the prompt and one ``<turn_aborted>``,
    and no summary."""
    model, tool, log = Model(server, transport), Tool(), EventLog()
    later: list[dict[str, Any]] = []
    cancel = trio.Event()

    async def script() -> None:
        await model.next_request()
        await model.end([frames.response_created("resp-1"), frames.output_item_done(0, A),
                         frames.completed("resp-1", [A], usage_block=frames.usage(500_000))])
        compact = await model.next_request()
        assert compact["input"][-1] == {"type": "compaction_trigger"}, compact
        await trio.testing.wait_all_tasks_blocked()
        cancel.set()
        later.append(await model.next_request())  # the next turn compacts first: the context is still over
        await model.end([frames.output_item_done(0, {"type": "compaction", "encrypted_content": "SUMMARY"}),
                         frames.completed("resp-compact", [], usage_block=frames.usage(50))])
        await model.next_request()
        await model.end([FINAL])

    cancelled, done = await prompts(model, workspace, tool.tools(), script, log, "go", "again",
                                    cancel_first=cancel)

    assert isinstance(cancelled, ta.TurnCancelled) and terminals(log) == ["cancelled", "completed"]
    assert tool.finished == ["call-a"]
    assert [(p["call_id"], p["status"]) for p in log.payloads("tool.result")] == [("call-a", "completed")]
    [request] = later
    items = request["input"]
    assert calls_and_outputs(items) == [("call", "call-a"), ("output", "call-a")]
    assert output_of(items, "call-a") == ["done call-a"]
    assert items[-1] == {"type": "compaction_trigger"} and "SUMMARY" not in str(items[:-1])
    assert str(items).count("<turn_aborted>") == 1 and str(items).count("'text': 'go'") == 1
    assert well_formed(history(done))


def interrupted(response_id: str) -> dict[str, Any]:
    """An interrupted ``response.incomplete`` without an output list."""
    frame = frames.completed(response_id)
    frame["type"] = "response.incomplete"
    frame["response"].update(status="incomplete", incomplete_details={"reason": "interrupted"})
    del frame["response"]["output"]
    return frame


@pytest.mark.parametrize("then_cancel", [False, True], ids=["steered", "steered_then_cancelled"])
async def test_an_interrupting_steer_while_a_streamed_call_runs(
    server: FakeResponsesServer, workspace: Path, then_cancel: bool
) -> None:
    """The steer cuts the response; its running call is drained into history with its
    real output (no terminal event before), then the steer joins the next request. Or,
    cancelled while the call still runs: cancelled once, the call aborted once."""
    model, tool, log = Model(server, ta.Transport.WEBSOCKET), Tool(held=True), EventLog()
    later: list[dict[str, Any]] = []
    streaming, drained = trio.Event(), trio.Event()
    seen_while_held: list[list[str]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await tool.started.wait()
        streaming.set()
        interrupt = await model.next_request()
        assert interrupt["type"] == "response.interrupt", interrupt
        await model.send([{"type": "response.interrupt.accepted", "response_id": "resp-1"}, interrupted("resp-1")])
        await log.wait_for("model.call.completed")
        await trio.testing.wait_all_tasks_blocked()  # the turn waits for its call
        seen_while_held.append(terminals(log))
        drained.set()
        if not then_cancel:
            tool.release.set()
        later.append(await model.next_request())
        await model.end([FINAL])

    async with scripted(script, 20) as nursery, ta.open_agent(model.config(workspace, tools=tool.tools())) as agent:
        nursery.start_soon(log.consume, agent.events)
        turn = await agent.prompt("go")
        await streaming.wait()
        await turn.steer("second prompt", interrupt=True)
        await drained.wait()
        if then_cancel:
            await turn.cancel()
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
            done = await (await agent.prompt("again")).result()
        else:
            done = await turn.result()

    assert seen_while_held == [[]]
    [request] = later
    items = history(done)
    assert well_formed(items) and calls_and_outputs(items) == [("call", "call-a"), ("output", "call-a")]
    if then_cancel:  # a new socket: replayed in full
        assert terminals(log) == ["cancelled", "completed"] and tool.finished == []
        assert calls_and_outputs(request["input"]) == calls_and_outputs(items)
        assert "aborted" in output_of(items, "call-a")[0] and str(items).count("<turn_aborted>") == 1
    else:  # chained on the interrupted response: the call's output, then the steer
        assert terminals(log) == ["completed"] and tool.finished == ["call-a"]
        assert request["previous_response_id"] == "resp-1"
        assert calls_and_outputs(request["input"]) == [("output", "call-a")]
        assert output_of(items, "call-a") == ["done call-a"] and "second prompt" in str(request["input"][1:])
        assert str(items).count("second prompt") == 1


class Hostile:
    """A tool that raises, or returns what no output can hold."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour

    async def __call__(self, ctx: ta.ToolContext, args: Any) -> Any:
        await trio.lowlevel.checkpoint()
        if self.behaviour == "raises":
            raise RuntimeError("the tool broke")
        return {1, 2} if self.behaviour == "a_set" else b"bytes"

    def tools(self) -> ta.Tools:
        return ta.Tools.default().function("work", "Does work.", {"type": "object"}, self)


@pytest.mark.parametrize("behaviour", ["raises", "a_set", "bytes"])
async def test_a_hostile_tool_started_while_its_response_streams_is_a_failed_output(
    server: FakeResponsesServer, workspace: Path, behaviour: str
) -> None:
    """The call's task is the turn's nursery's child: what the tool does is answered as
    a failed output, never an exception that would end the turn."""
    model, log = Model(server, ta.Transport.WEBSOCKET), EventLog()
    later: list[dict[str, Any]] = []

    async def script() -> None:
        await model.next_request()
        await model.send([frames.response_created("resp-1"), frames.output_item_done(0, A)])
        await log.wait_for("tool.result")  # it ended while the response streams
        await model.end([frames.completed("resp-1", [A])])
        later.append(await model.next_request())
        await model.end([FINAL])

    [result] = await prompts(model, workspace, Hostile(behaviour).tools(), script, log, "go")

    assert terminals(log) == ["completed"]
    assert [p["status"] for p in log.payloads("tool.result")] == ["failed"]
    assert well_formed(history(result))
    assert calls_and_outputs(later[0]["input"]) == [("output", "call-a")]
