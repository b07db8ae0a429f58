"""Fork and spawn ports (nanocodex ``*fork*``, ``per_agent_tool_factory_*``, ``clean_spawn_*``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

from .._os_facts import wait_for_os_fact
from ..conftest import EventLog, assert_warmup, make_config, scripted, warm


async def test_latest_fork_during_streaming_inherits_the_active_prompt_delta(
    server: FakeResponsesServer, workspace: Path
) -> None:
    root_started, release_root = trio.Event(), trio.Event()

    async def script() -> None:
        root = await warm(server)
        active = await root.next_request()
        assert active["previous_response_id"] == "resp-warmup"
        assert active["reasoning"]["effort"] == "low"
        assert "active root prompt" in json.dumps(active)
        root_started.set()
        branch = await server.accept()
        fork = await branch.next_request()
        assert fork["previous_response_id"] == "resp-warmup"
        assert fork["reasoning"]["effort"] == "high"
        assert "active root prompt" in json.dumps(fork) and "BTW question" in json.dumps(fork)
        await branch.send_final("resp-branch")
        await release_root.wait()
        await root.send_final("resp-root")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            root = await agent.prompt("active root prompt")
            await root_started.wait()
            await agent.set_thinking(ta.Thinking.HIGH)
            async with agent.fork() as fork:
                assert fork.session_id != agent.session_id
                assert (await (await fork.prompt("BTW question")).result()).final_message == "done"
            release_root.set()
            assert (await root.result()).final_message == "done"


async def test_active_boundary_fork_sends_tool_and_steer_delta_then_replays_on_checkpoint_miss(
    server: FakeResponsesServer, workspace: Path
) -> None:
    boundary_seen, release_root = trio.Event(), trio.Event()
    source = (
        'const result = await tools.exec_command({cmd: "printf started > tool-started; '
        'while [ ! -f release-tool ]; do sleep 0.01; done; printf shit"}); text(result.output);'
    )

    async def script() -> None:
        root = await warm(server)
        initial = await root.next_request()
        assert initial["previous_response_id"] == "resp-warmup"
        await root.send_tool_call("resp-tool", "call-exec", "exec", source)
        continuation = await root.next_request()
        assert continuation["previous_response_id"] == "resp-tool"
        output, steer = continuation["input"]
        assert output["type"] == "custom_tool_call_output" and "shit" in json.dumps(output)
        assert steer["content"][0]["text"] == "print shat instead"
        boundary_seen.set()
        branch = await server.accept()
        incremental = await branch.next_request()
        assert incremental["previous_response_id"] == "resp-tool"
        inherited, inherited_steer, question = incremental["input"]
        assert inherited["id"] == output["id"] and "shit" in json.dumps(inherited)
        assert inherited_steer["content"][0]["text"] == "print shat instead"
        assert question["content"][0]["text"] == "BTW question"
        await branch.send_error("checkpoint expired", code="previous_response_not_found")
        replay = await branch.next_request()
        assert "previous_response_id" not in replay
        (replayed_output,) = [i for i in replay["input"] if i.get("type") == "custom_tool_call_output"]
        assert replayed_output["id"] == output["id"]
        text = json.dumps(replay)
        for needle in ("active root prompt", "call-exec", "shit", "print shat instead", "BTW question"):
            assert needle in text
        await branch.send_final("resp-branch")
        await release_root.wait()
        await root.send_final("resp-root")

    branch_log = EventLog()
    async with scripted(script, 15) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            root = await agent.prompt("active root prompt")
            await wait_for_os_fact((workspace / "tool-started").exists, "the tool starting")
            await root.steer("print shat instead")
            (workspace / "release-tool").write_bytes(b"")
            await boundary_seen.wait()
            async with agent.fork() as fork:
                nursery.start_soon(branch_log.consume, fork.events)
                assert (await (await fork.prompt("BTW question")).result()).final_message == "done"
            release_root.set()
            assert (await root.result()).final_message == "done"
    (retry,) = branch_log.payloads("model.attempt.retrying")
    assert retry["error_class"] == "checkpoint_missing"
    assert retry["opens_new_socket"] is False and retry["replay_mode"] == "full_history"


async def test_latest_and_historical_forks_keep_distinct_boundaries_during_an_active_turn(
    server: FakeResponsesServer, workspace: Path
) -> None:
    active_seen, release_active = trio.Event(), trio.Event()

    async def script() -> None:
        root = await warm(server)
        first = await root.next_request()
        assert "completed root prompt" in json.dumps(first)
        await root.send_final("resp-first")
        active = await root.next_request()
        assert active["previous_response_id"] == "resp-first"
        assert "active root prompt" in json.dumps(active)
        active_seen.set()
        latest = await server.accept()
        latest_request = await latest.next_request()
        assert latest_request["previous_response_id"] == "resp-first"
        assert [i["content"][0]["text"] for i in latest_request["input"]] == [
            "active root prompt", "latest branch prompt"
        ]
        await latest.send_final("resp-latest")
        historical = await server.accept()
        historical_request = await historical.next_request()
        assert historical_request["previous_response_id"] == "resp-first"
        assert [i["content"][0]["text"] for i in historical_request["input"]] == ["historical branch prompt"]
        assert "active root prompt" not in json.dumps(historical_request)
        await historical.send_final("resp-historical")
        await release_active.wait()
        await root.send_final("resp-active")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            completed = await (await agent.prompt("completed root prompt")).result()
            active = await agent.prompt("active root prompt")
            await active_seen.wait()
            async with agent.fork() as latest:
                assert (await (await latest.prompt("latest branch prompt")).result()).final_message == "done"
            async with agent.fork_from(completed) as historical:
                result = await (await historical.prompt("historical branch prompt")).result()
                assert result.final_message == "done"
            release_active.set()
            assert (await active.result()).final_message == "done"


async def test_historical_fork_runs_while_the_mainline_turn_is_in_flight(
    server: FakeResponsesServer, workspace: Path
) -> None:
    root_started, branch_started = trio.Event(), trio.Event()

    async def script() -> None:
        root = await server.accept()
        warmup = await root.next_request()
        assert_warmup(warmup)
        lineage, root_session = warmup["prompt_cache_key"], warmup["client_metadata"]["session_id"]
        await root.send_warmup("resp-warmup")
        first = await root.next_request()
        assert first["previous_response_id"] == "resp-warmup"
        await root.send_final("resp-first")
        second = await root.next_request()
        assert second["previous_response_id"] == "resp-first"
        await root.send_final("resp-second")
        mainline = await root.next_request()
        assert mainline["previous_response_id"] == "resp-second"
        root_started.set()
        branch = await server.accept()
        fork = await branch.next_request()
        assert fork["previous_response_id"] == "resp-first"
        assert fork["prompt_cache_key"] == lineage
        assert fork["client_metadata"]["session_id"] != root_session
        assert [i["content"][0]["text"] for i in fork["input"]] == ["fork prompt"]
        branch_started.set()
        await branch.send_final("resp-fork")
        await root.send_final("resp-mainline")  # the seed's root task: once the branch has started

    results: dict[str, str] = {}
    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            first = await (await agent.prompt(ta.Prompt("first prompt"))).result()
            await (await agent.prompt("second prompt")).result()
            mainline = await agent.prompt("continue mainline")
            await root_started.wait()
            async with agent.fork_from(first) as fork, trio.open_nursery() as both:
                branch = await fork.prompt("fork prompt")

                async def collect(name: str, turn: ta.Turn) -> None:
                    results[name] = (await turn.result()).final_message

                both.start_soon(collect, "mainline", mainline)
                both.start_soon(collect, "branch", branch)
    assert results == {"mainline": "done", "branch": "done"}


async def test_per_agent_tool_factory_binds_recursive_forks_to_the_invoking_agent(
    server: FakeResponsesServer, workspace: Path
) -> None:
    handles: list[ta.AgentHandle] = []

    def factory(handle: ta.AgentHandle) -> ta.Tools:
        handles.append(handle)
        return ta.Tools.empty()

    async def script() -> None:
        root = await server.accept()
        warmup = await root.next_request()
        lineage, root_session = warmup["prompt_cache_key"], warmup["client_metadata"]["session_id"]
        await root.send_warmup("resp-warmup")
        root_turn = await root.next_request()
        assert root_turn["previous_response_id"] == "resp-warmup"
        await root.send_final("resp-root")
        child = await server.accept()
        child_turn = await child.next_request()
        child_session = child_turn["client_metadata"]["session_id"]
        assert child_turn["previous_response_id"] == "resp-root"
        assert child_turn["prompt_cache_key"] == lineage and child_session != root_session
        await child.send_final("resp-child")
        grandchild = await server.accept()
        grandchild_turn = await grandchild.next_request()
        assert grandchild_turn["previous_response_id"] == "resp-child"
        assert grandchild_turn["prompt_cache_key"] == lineage
        assert grandchild_turn["client_metadata"]["session_id"] != child_session
        await grandchild.send_final("resp-grandchild")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace, tools_factory=factory)) as root:
            root_handle = handles[-1]
            assert root_handle.session_id == root.session_id
            await (await root.prompt(ta.Prompt("root turn"))).result()
            async with root_handle.fork() as child:
                child_handle = handles[-1]
                assert child_handle.session_id == child.session_id
                await (await child.prompt("child turn")).result()
                async with child_handle.fork() as grandchild:
                    assert len(handles) == 3
                    await (await grandchild.prompt("grandchild turn")).result()


async def test_clean_spawn_reuses_an_explicit_cache_key_without_history_or_lineage(
    server: FakeResponsesServer, workspace: Path
) -> None:
    handles: list[ta.AgentHandle] = []

    def factory(handle: ta.AgentHandle) -> ta.Tools:
        handles.append(handle)
        return ta.Tools.empty()

    async def script() -> None:
        root = await server.accept()
        root_warmup = await root.next_request()
        assert root_warmup["prompt_cache_key"] == "shared-private-prefix"
        assert "shared private configuration" in json.dumps(root_warmup)
        await root.send_warmup("resp-root-warmup")
        root_turn = await root.next_request()
        assert root_turn["previous_response_id"] == "resp-root-warmup"
        await root.send_final("resp-root")
        child = await server.accept()
        child_warmup = await child.next_request()
        assert child_warmup["reasoning"]["effort"] == "high"
        assert child_warmup["client_metadata"]["session_id"] != "root-lineage"
        assert child_warmup["prompt_cache_key"] == "shared-private-prefix"
        assert "previous_response_id" not in child_warmup
        assert "shared private configuration" in json.dumps(child_warmup)
        await child.send_warmup("resp-child-warmup")
        child_turn = await child.next_request()
        assert child_turn["previous_response_id"] == "resp-child-warmup"
        await child.send_final("resp-child")

    config = ta.AgentConfig(
        auth="private-test-key", instructions="shared private configuration", thinking=ta.Thinking.LOW,
        responses=ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url), session_id="root-lineage",
        prompt_cache_key="shared-private-prefix", workspace=workspace, tools_factory=factory,
    )
    async with scripted(script):
        async with ta.open_agent(config) as root:
            root_handle = handles[-1]
            await (await root.prompt("root turn")).result()
            await root.set_thinking(ta.Thinking.HIGH)
            async with root_handle.spawn() as child:
                assert len(handles) == 2
                await (await child.prompt("clean child turn")).result()


async def test_missing_stored_checkpoint_replays_local_history_once(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_final("resp-first")
        branch = await server.accept()
        checkpoint = await branch.next_request()
        assert checkpoint["previous_response_id"] == "resp-first"
        assert len(checkpoint["input"]) == 1
        await branch.send_error("checkpoint expired", code="previous_response_not_found")
        replay = await branch.next_request()
        assert "previous_response_id" not in replay
        assert replay["store"] is True
        assert replay["input"][0]["type"] == "additional_tools"
        assert replay["input"][1]["role"] == "developer"
        assert "root prompt" in json.dumps(replay) and "branch after eviction" in json.dumps(replay)
        # The prefix (tools, 2 developer messages, environment), then the root turn and the branch prompt.
        assert [item.get("role") for item in replay["input"]] == [
            "developer", "developer", "developer", "user", "user", "assistant", "user"
        ]
        assert [item["content"][0]["text"] for item in replay["input"][4:]] == [
            "root prompt", "done", "branch after eviction"
        ]
        await branch.send_final("resp-replayed")

    log = EventLog()
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace)) as agent:
            first = await (await agent.prompt(ta.Prompt("root prompt"))).result()
            async with agent.fork_from(first) as fork:
                nursery.start_soon(log.consume, fork.events)
                assert (await (await fork.prompt("branch after eviction")).result()).final_message == "done"
    (retry,) = log.payloads("model.attempt.retrying")
    assert retry["error_class"] == "checkpoint_missing"
    assert retry["replay_mode"] == "full_history" and retry["opens_new_socket"] is False


async def test_websocket_ephemeral_chains_on_connection_and_replays_a_fresh_fork(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        root = await server.accept()
        warmup = await root.next_request()
        assert warmup["store"] is False and warmup["generate"] is False
        await root.send_warmup("resp-warmup")
        first = await root.next_request()
        assert first["store"] is False and first["previous_response_id"] == "resp-warmup"
        await root.send_final("resp-first")
        second = await root.next_request()
        assert second["previous_response_id"] == "resp-first" and len(second["input"]) == 1
        await root.send_final("resp-second")
        branch = await server.accept()
        replay = await branch.next_request()
        assert replay["store"] is False and "previous_response_id" not in replay
        assert "first prompt" in json.dumps(replay) and "branch prompt" in json.dumps(replay)
        assert "second prompt" not in json.dumps(replay)
        await branch.send_final("resp-branch")

    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, store=False)
    async with scripted(script):
        config = make_config(server, workspace, responses=responses, session_id="websocket-ephemeral")
        async with ta.open_agent(config) as agent:
            first = await (await agent.prompt("first prompt")).result()
            assert (await (await agent.prompt("second prompt")).result()).final_message == "done"
            async with agent.fork_from(first) as fork:
                assert (await (await fork.prompt("branch prompt")).result()).final_message == "done"


async def test_https_stored_fork_uses_the_historical_response_checkpoint(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        root = await server.accept_http()
        assert root.body["store"] is True and "previous_response_id" not in root.body
        await root.send_final("resp-root")
        branch = await server.accept_http()
        assert branch.body["store"] is True
        assert branch.body["previous_response_id"] == "resp-root"
        assert "branch prompt" in json.dumps(branch.body)
        await branch.send_final("resp-branch")

    responses = ta.Responses(profile=ta.Profile.OPENAI,
                             transport=ta.Transport.HTTPS, store=True, api_base_url=server.http_base_url)
    async with scripted(script):
        config = make_config(server, workspace, responses=responses, session_id="https-stored")
        async with ta.open_agent(config) as agent:
            root = await (await agent.prompt("root prompt")).result()
            async with agent.fork_from(root) as fork:
                assert (await (await fork.prompt("branch prompt")).result()).final_message == "done"


async def test_fork_before_any_boundary_and_foreign_results_are_refused(
    server: FakeResponsesServer, workspace: Path
) -> None:
    async def script() -> None:
        for _ in range(2):
            conn = await server.accept()
            await conn.next_request()
            await conn.send_warmup("resp-warmup")
            await conn.next_request()
            await conn.send_final("resp-x")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            with pytest.raises(ta.ForkBeforeCompletedTurn, match="prompt the agent first"):
                agent.fork()
            result = await (await agent.prompt("hi")).result()
        other_config = make_config(server, workspace, session_id="another-lineage")
        async with ta.open_agent(other_config) as other:
            await (await other.prompt("hi")).result()
            with pytest.raises(ta.CheckpointLineageMismatch, match="lineage"):
                other.fork_from(result)


async def test_closing_a_fork_leaves_the_root_running(server: FakeResponsesServer, workspace: Path) -> None:
    events: list[Any] = []

    async def script() -> None:
        root = await warm(server)
        await root.next_request()
        await root.send_final("resp-1")
        branch = await server.accept()
        await branch.next_request()  # the branch's turn is cancelled by leaving its block
        root_again = await root.next_request()
        events.append(root_again)
        await root.send_final("resp-2")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            await (await agent.prompt("one")).result()
            with trio.move_on_after(5) as scope:
                async with agent.fork() as fork:
                    turn = await fork.prompt("never answered")
                    await trio.testing.wait_all_tasks_blocked()
                    scope.cancel()
            assert scope.cancelled_caught
            with pytest.raises(ta.TurnCancelled):
                await turn.result()
            assert (await (await agent.prompt("two")).result()).final_message == "done"
    assert events[0]["previous_response_id"] == "resp-1"


async def test_a_fork_starts_from_what_was_current_when_fork_was_called(
    server: FakeResponsesServer, workspace: Path
) -> None:
    """``fork()`` fixes the boundary and the thinking at the call, even though the child's
    config is built only when its block is entered: a turn and a ``set_thinking`` in between
    reach neither."""
    requests: list[Any] = []

    async def script() -> None:
        root = await warm(server)
        for response in ("resp-1", "resp-2"):
            await root.next_request()
            await root.send_final(response)
        branch = await server.accept()
        requests.append(await branch.next_request())
        await branch.send_final("resp-branch")

    async with scripted(script):
        async with ta.open_agent(make_config(server, workspace)) as agent:
            await (await agent.prompt("one")).result()
            pending = agent.fork()
            await (await agent.prompt("two")).result()
            await agent.set_thinking(ta.Thinking.HIGH)
            async with pending as fork:
                assert fork.path == f"{agent.path}/fork-1"
                assert (await (await fork.prompt("branch")).result()).final_message == "done"
    (request,) = requests
    assert request["previous_response_id"] == "resp-1"
    assert request["reasoning"]["effort"] == "low"
    assert "two" not in json.dumps(request["input"])
