"""A user's application file that touches every public name; type-checked, never run.

``tests/test_event_typing.py`` runs ``mypy --strict --disallow-any-expr`` and pyright
(strict) on it: every value read from the public API has a precise type (the
``assert_type`` calls), tool handlers are typed end to end, and no ``Any`` leaks into
user code. ``user_events.py`` covers the event payload types; together the two files
name every entry of ``trio_agent.__all__`` (checked by the test).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, assert_type

import trio

import trio_agent as ta


@ta.tool
async def add(a: int, b: int) -> str:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return str(a + b)


async def shout(ctx: ta.ToolContext, text: str) -> str:
    assert_type(ctx.call_id, str)
    assert_type(ctx.workspace, Path)
    assert_type(ctx.agent, ta.AgentHandle)
    ctx.report("shouting")
    return text.upper()


async def lookup(ctx: ta.ToolContext, args: dict[str, ta.JsonValue]) -> str:
    key = args.get("key")
    assert_type(key, ta.JsonValue)
    return str(key)


@ta.tool(name="multiply", description="Multiply two numbers.")
async def times(a: int, b: int) -> str:
    return str(a * b)


def tools() -> ta.Tools:
    named: ta.ToolDecorator = ta.tool(name="halve")
    assert_type(times, ta.ToolSpec)
    spec = add
    assert_type(spec, ta.ToolSpec)
    assert_type(spec.name, str)
    assert_type(spec.kind, Literal["function", "custom"])
    handler: ta.Handler[str] = shout
    server = ta.McpServer.http("http://127.0.0.1:9/mcp", bearer_token_env="MCP_TOKEN")
    assert_type(server, ta.McpServer)
    return (
        ta.Tools.default()
        .add(spec)
        .add(times)
        .add(named(shout))
        .function("lookup", "Look a key up.", {"type": "object"}, lookup)
        .custom("shout", "Shout the input.", handler)
        .with_clock()
        .with_mcp("docs", server)
        .without_web_search()
    )


async def approve(request: ta.ApprovalRequest) -> ta.ApprovalDecision:
    assert_type(request.kind, ta.ApprovalKind)
    assert_type(request.command, str | None)
    changed: tuple[ta.ChangedFile, ...] = request.changes
    if request.kind is ta.ApprovalKind.FILE_CHANGE and changed:
        return ta.ApprovalDecision.DENY
    return ta.ApprovalDecision.APPROVE


def config(workspace: Path, home: Path) -> ta.AgentConfig:
    auth = ta.ChatGptAuth.from_codex_home()
    assert_type(auth, str | ta.ChatGptAuth)
    snapshot = ta.ChatGptAuthSnapshot(token="t", account_id=None)
    assert_type(snapshot.token, str)
    return ta.AgentConfig(
        auth=auth,
        workspace=workspace,
        thinking=ta.Thinking.LOW,
        responses=ta.Responses(profile=ta.Profile.OPENAI,
                               transport=ta.Transport.WEBSOCKET, history=ta.History.INCREMENTAL),
        tools=tools(),
        rollout=ta.RolloutConfig(home),
        sandbox=ta.Sandbox(ta.SandboxMode.WORKSPACE_WRITE, network=False),
        approval=ta.Approvals(ta.ApprovalPolicy.ON_REQUEST, hook=approve),
        tracing=None if workspace.name else ta.Tracing(),
    )


async def show(worker: ta.Agent) -> None:
    async for event in worker.events:
        assert_type(event.kind, ta.EventKind)


async def delegate(ctx: ta.ToolContext, task: str) -> str:
    async with ctx.agent.spawn("helper") as helper:  # the handle names the agent through a protocol
        assert_type(helper.path, str)
        result = await (await helper.prompt(task)).result()
        if isinstance(helper, ta.Agent):
            assert_type(helper.sandbox, ta.SandboxMode)
    return result.final_message


def per_agent_tools(handle: ta.AgentHandle) -> ta.Tools:
    assert_type(handle.session_id, str)
    return ta.Tools.default().with_collaboration(watch=show).custom("delegate", "Delegate a task.", delegate)


def factory_config(workspace: Path) -> ta.AgentConfig:
    return ta.AgentConfig(auth="sk-test", workspace=workspace, tools_factory=per_agent_tools)


async def converse(agent: ta.Agent) -> str:
    assert_type(agent.sandbox, ta.SandboxMode)
    assert_type(agent.events, ta.AgentEvents)
    turn = await agent.prompt(ta.Prompt("list the files"))
    assert_type(turn, ta.Turn)
    assert_type(turn.status, ta.TurnStatus)
    if await turn.wait_running():
        try:
            await turn.steer("and count them")
        except (ta.TurnNotSteerable, ta.SteerQueueFull):
            pass
    control: ta.TurnControl = turn.control()
    del control
    try:
        result = await turn.result()
    except ta.TurnCancelled:
        return "cancelled"
    except ta.TurnFailed as failed:
        error = failed.responses_error
        if isinstance(error, (ta.AuthenticationError, ta.UsageLimitExceeded, ta.InvalidImageRequest)):
            return "fix your account"
        if isinstance(error, (ta.ConnectionFailed, ta.ConnectionLost, ta.ResponseTimeout, ta.ProtocolError)):
            return "network"
        if isinstance(error, (ta.CheckpointMissing, ta.ApiError)):
            return "api"
        return "failed"
    assert_type(result, ta.TurnResult)
    assert_type(result.final_message, str)
    assert_type(result.response_id, str | None)
    session = result.snapshot()
    assert_type(session, ta.SessionSnapshot)
    for item in session.history:
        assert_type(item, dict[str, ta.JsonValue])
    schema = ta.OutputSchema({"type": "object", "properties": {"n": {"type": "integer"}}}, name="count")
    assert_type(schema.schema, dict[str, ta.JsonValue])
    structured = await agent.prompt("how many?", output_schema=schema)
    await agent.prompt("and now?", output_schema={"type": "object", "properties": {}})
    await agent.set_model("gpt-5.4")
    assert_type(agent.model, str)
    assert_type((await structured.result()).final_message, str)  # the JSON text
    submission = await agent.submit("next")
    assert_type(submission, ta.Submission)
    assert_type(submission.kind, Literal["started", "steered"])
    started = await agent.start_if_idle("maybe")
    if isinstance(started, ta.Declined):
        return "busy"
    stats = agent.statistics()
    assert_type(stats, ta.AgentStatistics)
    assert_type(stats.turns_accepted, int)
    await agent.flush_telemetry()  # tracing's deferred spans and recordings, handed over now
    rollout = agent.rollout
    if rollout is not None:
        assert isinstance(rollout, ta.Rollout)
        assert_type(rollout.path, Path)
    async with agent.fork() as branch, agent.spawn("helper") as child:
        assert_type(branch, ta.Agent)
        assert_type(child.path, str)
    try:
        async with agent.fork_from(result):
            pass
    except (ta.ForkBeforeCompletedTurn, ta.CheckpointLineageMismatch):
        pass
    try:
        await agent.post_mail("/root/reviewer", "looks good")
    except ta.MailboxFull:
        pass
    try:
        sleep = await agent.sleep(60)
        assert_type(sleep, ta.Sleep)
        wakeup = await sleep.woken()
        assert_type(wakeup, ta.Wakeup)
        assert_type(wakeup.reason, Literal["mail", "turn", "timeout", "cancelled", "closed"])
        assert_type(wakeup.turn, ta.Turn | None)
        await sleep.cancel()
    except ta.SleepRefused:
        pass
    return result.final_message


async def record(agent: ta.Agent) -> int:
    out = io.StringIO()
    async with trio.open_nursery() as nursery:
        watched: ta.EventSubscription = agent.events.subscribe(max_buffer=128)
        nursery.start_soon(ta.write_jsonl, watched, io.StringIO())
    count = await ta.write_jsonl(agent.events, out)
    assert_type(count, int)
    try:
        await watched.receive()
    except ta.EventsOverflowed:
        pass
    return count


def watch(event: ta.AgentEvent) -> str:
    assert_type(event.kind, ta.EventKind)
    assert_type(event.seq, int)
    assert_type(event.payload, dict[str, ta.JsonValue])
    declared: Mapping[ta.EventKind, type] = ta.EVENT_PAYLOADS
    return declared[event.kind].__name__


async def threads(home: Path, base: ta.AgentConfig) -> list[str]:
    async with ta.open_thread_manager(home, config=base) as manager:
        assert_type(manager, ta.ThreadManager)
        agent = await manager.start(subscriber="client-1")
        status = manager.status(agent.session_id)
        assert_type(status, ta.ThreadStatus)
        info = manager.read(agent.session_id)
        assert_type(info, ta.ThreadInfo)
        assert_type(info.rollout_path, Path | None)
        unsubscribed = manager.unsubscribe(agent.session_id, "client-1")
        assert_type(unsubscribed, ta.UnsubscribeStatus)
        events: ta.ThreadEvents = manager.events
        change = events.receive_nowait()
        assert_type(change, ta.ThreadEvent)
        try:
            await manager.resume("missing")
        except ta.ThreadError:
            pass
        return manager.loaded()


def resume(home: Path, thread_id: str) -> ta.AgentConfig | None:
    try:
        durable = ta.RolloutConfig(home).load_session(thread_id)
    except (ta.RolloutError, ta.InvalidSessionSnapshot):
        return None
    assert_type(durable, ta.DurableSession)
    assert_type(durable.snapshot, ta.SessionSnapshot)
    try:
        return ta.AgentConfig(auth="sk-test", workspace=Path(durable.workspace), resume=durable.snapshot)
    except (ta.ConfigError, ta.WorkspaceChanged, ta.SandboxUnavailable):
        return None


async def main(workspace: Path, home: Path) -> None:
    try:
        async with ta.open_agent(config(workspace, home)) as agent:
            await converse(agent)
            await record(agent)
    except (ta.AgentClosed, ta.InvalidPrompt, ta.TurnNotCancellable, ta.AgentError, ta.ResponsesError):
        pass
    warning: type[Warning] = ta.RolloutWarning
    del warning


if __name__ == "__main__":
    trio.run(main, Path("."), Path(".codex"))
