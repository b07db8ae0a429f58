"""Our events as protocol items, on the wire (docs/app-server.md, "Events to items").

Tests with real commands (``exec`` cells running ``exec_command``) use Trio's real
clock, each bounded; the others run under ``MockClock``.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent._tools._shell_env import resolve_shell
from trio_agent.testing import AppServerClient, AppServerError, FakeConnection, frames

from ._harness import Json, app_server, send_message, start_thread, text_input

REAL_TIME_LIMIT = 30


async def turn(client: AppServerClient, thread_id: str, text: str) -> tuple[Json, list[Json]]:
    """Run a turn; its ``turn/completed`` params and every other message it caused, in order."""
    client.take_pending()
    started = await client.request("turn/start", {"threadId": thread_id, "input": text_input(text)})
    turn_id = started["turn"]["id"]
    completed = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)
    return completed, client.take_pending()


def methods(messages: list[Json]) -> list[str]:
    return [m["method"] for m in messages if "method" in m]


def items(messages: list[Json], kind: str, method: str = "item/completed") -> list[Json]:
    return [m["params"]["item"] for m in messages if m.get("method") == method and m["params"]["item"]["type"] == kind]


def exec_then_answer(source: str) -> Any:
    async def reply(conn: FakeConnection, request: Json) -> None:
        if not any(item.get("type") == "custom_tool_call_output" for item in request["input"]):
            call = frames.custom_tool_call("call-exec", "exec", source, item_id="ctc-1")
            await conn.send(frames.output_item_done(0, call))
            await conn.send(frames.completed("resp-1", [call]))
        else:
            await send_message(conn, "resp-2", "ran it")

    return reply


async def test_a_command_run_from_a_cell_is_one_command_execution_with_its_output(tmp_path: Path) -> None:
    # codex shows one commandExecution per command; the exec cell (JavaScript) is no item.
    source = "const r = await tools.exec_command({cmd: \"printf 'a\\\\n'; exit 3\", login: false});\ntext(r.output);"
    async with app_server(tmp_path, exec_then_answer(source)) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        with trio.fail_after(REAL_TIME_LIMIT):
            completed, seen = await turn(client, thread_id, "run it")
    assert completed["turn"]["status"] == "completed"
    (shell,) = items(seen, "commandExecution", "item/started")
    assert (shell["id"], shell["status"], shell["source"]) == ("call-exec/code-1", "inProgress", "unifiedExecStartup")
    # The command line the shell runs, as codex shows it (`/bin/bash -c '...'`).
    assert shell["command"] == shlex.join([resolve_shell(None, os.environ.get("SHELL")), "-c", "printf 'a\\n'; exit 3"])
    assert shell["commandActions"] == [{"type": "unknown", "command": "printf 'a\\n'; exit 3"}]
    assert shell["cwd"] == str(harness.workspace.resolve())
    (done,) = items(seen, "commandExecution")
    assert (done["id"], done["status"], done["exitCode"], done["aggregatedOutput"]) == (
        "call-exec/code-1", "failed", 3, "a\n")
    assert isinstance(done["durationMs"], int) and done["command"] == shell["command"]
    deltas = [m["params"] for m in seen if m.get("method") == "item/commandExecution/outputDelta"]
    assert [(d["itemId"], d["delta"]) for d in deltas] == [("call-exec/code-1", "a\n")]
    started_ids = [m["params"]["item"]["id"] for m in seen if m.get("method") == "item/started"]
    assert "call-exec" not in started_ids  # the cell itself is not shown
    order = [(m["method"], m["params"].get("item", {}).get("id") or m["params"].get("itemId")) for m in seen
             if m.get("method", "").startswith("item/")]
    assert order.index(("item/started", "call-exec/code-1")) < order.index(
        ("item/commandExecution/outputDelta", "call-exec/code-1")) < order.index(("item/completed", "call-exec/code-1"))
    assert [item["text"] for item in items(seen, "agentMessage")] == ["ran it"]


async def test_a_cells_plan_and_patch_are_a_plan_update_and_a_file_change(tmp_path: Path) -> None:
    plan = {"explanation": "two steps", "plan": [{"step": "write it", "status": "in_progress"},
                                                 {"step": "check it", "status": "pending"}]}
    patch = "*** Begin Patch\n*** Add File: made.txt\n+made\n*** End Patch"
    source = f"await tools.update_plan({json.dumps(plan)});\nawait tools.apply_patch({json.dumps(patch)});\ntext('ok');"
    async with app_server(tmp_path, exec_then_answer(source)) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        with trio.fail_after(REAL_TIME_LIMIT):
            completed, seen = await turn(client, thread_id, "plan and patch")
    (update,) = [m["params"] for m in seen if m.get("method") == "turn/plan/updated"]
    assert update == {"threadId": thread_id, "turnId": completed["turn"]["id"], "explanation": "two steps",
                      "plan": [{"step": "write it", "status": "inProgress"}, {"step": "check it", "status": "pending"}]}
    (change,) = items(seen, "fileChange")
    assert change["id"] == "call-exec/code-2" and change["status"] == "completed"
    assert change["changes"] == [{"path": "made.txt", "kind": {"type": "add"}, "diff": "made\n"}]
    started = [m["params"]["item"]["type"] for m in seen if m.get("method") == "item/started"]
    assert started == ["userMessage", "fileChange", "agentMessage"]  # none for the cell, none for update_plan
    assert (harness.workspace / "made.txt").read_text() == "made\n"


async def test_command_output_streams_as_deltas_while_the_command_runs(tmp_path: Path) -> None:
    # The command prints, then waits for a file the test creates only once the first
    # delta has arrived: that delta came while the command was running.
    gate = tmp_path / "gate"
    cmd = f"echo first; while [ ! -e {gate} ]; do sleep 0.01; done; echo second"
    source = (f"const r = await tools.exec_command({{cmd: {json.dumps(cmd)}, login: false, yield_time_ms: 20000}});\n"
              "text(r.output);")
    async with app_server(tmp_path, exec_then_answer(source)) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        with trio.fail_after(REAL_TIME_LIMIT):
            client.take_pending()
            started = await client.request("turn/start", {"threadId": thread_id, "input": text_input("stream it")})
            first = await client.read_notification(
                "item/commandExecution/outputDelta", lambda p: p["itemId"] == "call-exec/code-1")
            assert first["delta"] == "first\n"
            gate.touch()
            await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == started["turn"]["id"])
            seen = client.take_pending()
    deltas = [first["delta"]] + [m["params"]["delta"] for m in seen
                                 if m.get("method") == "item/commandExecution/outputDelta"
                                 and m["params"]["itemId"] == "call-exec/code-1"]
    (shell,) = [item for item in items(seen, "commandExecution") if item["id"] == "call-exec/code-1"]
    assert shell["aggregatedOutput"] == "first\nsecond\n" and "".join(deltas) == shell["aggregatedOutput"]
    order = [(m["method"], m["params"].get("itemId") or m["params"].get("item", {}).get("id")) for m in seen]
    last_delta = max(i for i, entry in enumerate(order)
                     if entry == ("item/commandExecution/outputDelta", "call-exec/code-1"))
    assert last_delta < order.index(("item/completed", "call-exec/code-1"))


async def test_write_stdin_is_a_command_execution_of_the_session_it_feeds(tmp_path: Path) -> None:
    source = (
        'const s = await tools.exec_command({cmd: "read x; echo got $x", yield_time_ms: 250});\n'
        'const r = await tools.write_stdin({session_id: s.session_id, chars: "hi\\n", yield_time_ms: 5000});\n'
        "text(r.output);"
    )
    async with app_server(tmp_path, exec_then_answer(source)) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        with trio.fail_after(REAL_TIME_LIMIT):
            completed, seen = await turn(client, thread_id, "talk to it")
    assert completed["turn"]["status"] == "completed"
    # One item for the command: the write_stdin that feeds it is a terminal interaction
    # of that item, whose output joins it; the item ends when the process does.
    (item,) = items(seen, "commandExecution")
    assert [m["params"]["item"]["id"] for m in seen if m.get("method") == "item/started"
            and m["params"]["item"]["type"] == "commandExecution"] == [item["id"]] == ["call-exec/code-1"]
    assert item["commandActions"][0]["command"] == "read x; echo got $x" and item["source"] == "unifiedExecStartup"
    assert item["status"] == "completed" and item["exitCode"] == 0 and item["processId"]
    assert item["aggregatedOutput"] == "got hi\n" and isinstance(item["durationMs"], int)
    (typed,) = [m["params"] for m in seen if m.get("method") == "item/commandExecution/terminalInteraction"]
    assert typed == {"threadId": thread_id, "turnId": completed["turn"]["id"], "itemId": item["id"],
                     "processId": item["processId"], "stdin": "hi\n"}
    deltas = [m["params"]["delta"] for m in seen if m.get("method") == "item/commandExecution/outputDelta"]
    assert "".join(deltas) == item["aggregatedOutput"]
    order = [m.get("method") for m in seen]
    assert order.index("item/commandExecution/terminalInteraction") < order.index("item/completed", order.index(
        "item/commandExecution/terminalInteraction"))


async def reasoning_then_answer(conn: FakeConnection, request: Json) -> None:
    await conn.send(frames.response_created("resp-1"))
    for part in ("Thinking ", "hard."):
        await conn.send({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": part})
    message = frames.assistant_message("Hello there", item_id="msg-a", phase="final_answer")
    await conn.send(frames.output_item_added(1, {**message, "status": "in_progress", "content": []}))
    for part in ("Hello", " there"):
        await conn.send(frames.text_delta(1, part))
    await conn.send(frames.output_item_done(1, message))
    await conn.send(frames.completed("resp-1", [message], usage_block=frames.usage(30)))


async def test_reasoning_and_streamed_answers_and_token_usage(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, reasoning_then_answer) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        completed, seen = await turn(client, thread_id, "think")
        _, again = await turn(client, thread_id, "again")
    (reasoning,) = items(seen, "reasoning")
    assert reasoning["summary"] == ["Thinking hard."] and reasoning["content"] == []
    summary_deltas = [m["params"]["delta"] for m in seen if m.get("method") == "item/reasoning/summaryTextDelta"]
    assert summary_deltas == ["Thinking ", "hard."]
    (answer,) = items(seen, "agentMessage")
    assert answer == {**answer, "id": "msg-a", "text": "Hello there", "phase": "final_answer"}
    deltas = [m["params"] for m in seen if m.get("method") == "item/agentMessage/delta"]
    assert [d["delta"] for d in deltas] == ["Hello", " there"] and {d["itemId"] for d in deltas} == {"msg-a"}
    assert completed["turn"]["items"] == [answer] and completed["turn"]["itemsView"] == "summary"
    (usage,) = [m["params"]["tokenUsage"] for m in seen if m.get("method") == "thread/tokenUsage/updated"]
    assert usage["last"]["totalTokens"] == 30 and usage["total"] == usage["last"]
    assert usage["modelContextWindow"] == 272_000
    (usage,) = [m["params"]["tokenUsage"] for m in again if m.get("method") == "thread/tokenUsage/updated"]
    assert usage["total"]["totalTokens"] == 60 and usage["last"]["totalTokens"] == 30
    # Order within a turn: status active, turn/started, the prompt, then what the model did, idle, completed.
    in_turn = [m for m in methods(seen) if m != "thread/started"]  # thread/start's own notification
    assert in_turn[:4] == ["thread/status/changed", "turn/started", "item/started", "item/completed"]
    assert methods(seen)[-1] == "thread/status/changed"  # idle, announced before turn/completed
    assert seen[-1]["params"]["status"] == {"type": "idle"}


class Held:
    """A model whose first answer waits for ``release``; later requests answer at once."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.requests: list[Json] = []

    async def __call__(self, conn: FakeConnection, request: Json) -> None:
        self.requests.append(request)
        if len(self.requests) == 1:
            await self.release.wait()
        await send_message(conn, f"resp-{len(self.requests)}", f"answer {len(self.requests)}")


async def test_steers_join_the_running_turn_and_turn_start_on_a_busy_thread_steers(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    model = Held()
    async with app_server(tmp_path, model) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        first = await client.request("turn/start", {"threadId": thread_id, "input": text_input("start")})
        turn_id = first["turn"]["id"]
        await harness.model.wait_for_request_count(1)
        steered = await client.request("turn/steer", {"threadId": thread_id, "expectedTurnId": turn_id,
                                                      "input": text_input("steer one")})
        assert steered == {"turnId": turn_id}
        busy = await client.request("turn/start", {"threadId": thread_id, "input": text_input("steer two"),
                                                   "clientUserMessageId": "client-7"})
        assert busy["turn"]["id"] == turn_id and busy["turn"]["status"] == "inProgress"
        with pytest.raises(AppServerError) as caught:
            await client.request("turn/steer", {"threadId": thread_id, "expectedTurnId": "other",
                                                "input": text_input("wrong")})
        assert caught.value.code == -32600 and f"expected turn other but turn {turn_id}" in caught.value.message
        model.release.set()
        completed = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)
        seen = client.take_pending()
    assert completed["turn"]["status"] == "completed"
    assert [text for item in model.requests[1]["input"] for text in [json.dumps(item)]
            if "steer one" in text or "steer two" in text]
    users = items(seen, "userMessage")
    assert [u["content"][0]["text"] for u in users] == ["start", "steer one", "steer two"]
    assert users[2]["clientId"] == "client-7"
    assert [a["text"] for a in items(seen, "agentMessage")] == ["answer 1", "answer 2"]
    assert len([m for m in seen if m.get("method") == "turn/started"]) == 1


async def test_interrupt_ends_the_turn_as_interrupted(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    model = Held()
    async with app_server(tmp_path, model) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        first = await client.request("turn/start", {"threadId": thread_id, "input": text_input("long")})
        turn_id = first["turn"]["id"]
        await harness.model.wait_for_request_count(1)
        assert await client.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id}) == {}
        completed = await client.read_notification("turn/completed")
        assert completed["turn"]["id"] == turn_id and completed["turn"]["status"] == "interrupted"
        assert completed["turn"]["error"] is None
        with pytest.raises(AppServerError) as caught:
            await client.request("turn/interrupt", {"threadId": thread_id, "turnId": turn_id})
        assert "is not running" in caught.value.message
        read = await client.request("thread/read", {"threadId": thread_id, "includeTurns": True})
    assert read["thread"]["status"] == {"type": "idle"}
    assert [(t["id"], t["status"]) for t in read["thread"]["turns"]] == [(turn_id, "interrupted")]


async def test_a_failed_turn_reports_error_and_retries_say_will_retry(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    attempts: list[int] = []

    async def flaky(conn: FakeConnection, request: Json) -> None:
        attempts.append(1)
        if len(attempts) == 1:  # retried (server_error is retryable)
            await conn.send({"type": "response.failed", "response": {
                "id": "resp-1", "error": {"code": "server_error", "message": "overloaded"}}})
        else:  # not retried
            await conn.send({"type": "response.failed", "response": {
                "id": "resp-2", "error": {"code": "invalid_request_error", "message": "bad request"}}})

    async with app_server(tmp_path, flaky) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        completed, seen = await turn(client, thread_id, "try")
    retry, final = [m["params"] for m in seen if m.get("method") == "error"]
    assert retry["willRetry"] is True and "overloaded" in retry["error"]["message"]
    assert final["willRetry"] is False and "bad request" in final["error"]["message"]
    assert completed["turn"]["status"] == "failed" and "bad request" in completed["turn"]["error"]["message"]
    statuses = [m["params"]["status"] for m in seen if m.get("method") == "thread/status/changed"]
    assert statuses == [{"type": "active", "activeFlags": []}, {"type": "systemError"}]


COMPACTION_DONE = {
    "type": "response.output_item.done",
    "item": {"id": "cmp-server-id", "type": "compaction", "encrypted_content": "opaque-summary"},
}


async def test_an_automatic_compaction_is_a_context_compaction_item_and_thread_compacted(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def model(conn: FakeConnection, request: Json) -> None:
        if request["input"][-1] == {"type": "compaction_trigger"}:
            await conn.send(COMPACTION_DONE)
            await conn.send(frames.completed("resp-compact", [], usage_block=frames.usage(120)))
        else:  # a full context: the next turn compacts before sampling
            message = frames.assistant_message("noted", item_id=f"msg-{len(conn.requests)}")
            await conn.send(frames.output_item_done(0, message))
            await conn.send(frames.completed(f"resp-{len(conn.requests)}", [message],
                                             usage_block=frames.usage(372_001)))

    async with app_server(tmp_path, model) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        _, first = await turn(client, thread_id, "fill the context")
        completed, second = await turn(client, thread_id, "and more")
    assert items(first, "contextCompaction") == []
    (compaction,) = items(second, "contextCompaction")
    (compacted,) = [m["params"] for m in second if m.get("method") == "thread/compacted"]
    assert compacted == {"threadId": thread_id, "turnId": completed["turn"]["id"]}
    assert compaction["id"].startswith("compaction-")


async def test_injected_items_reach_the_next_request(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    injected = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "injected note"}]}
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        assert await client.request("thread/inject_items", {"threadId": thread_id, "items": [injected]}) == {}
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/inject_items", {"threadId": thread_id, "items": [{"no": "type"}]})
        assert caught.value.code == -32602
        await turn(client, thread_id, "go")
    assert "injected note" in json.dumps(harness.model.requests[0]["input"])


async def compacting(conn: FakeConnection, request: Json) -> None:
    """A compaction request gets its summary; anything else a short answer."""
    if request["input"][-1] == {"type": "compaction_trigger"}:
        await conn.send(COMPACTION_DONE)
        await conn.send(frames.completed(f"resp-compact-{len(conn.requests)}", [], usage_block=frames.usage(120)))
    else:
        await send_message(conn, f"resp-{len(conn.requests)}", "noted")


async def test_manual_compaction_is_a_turn_with_a_context_compaction_item(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, compacting) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await turn(client, thread_id, "remember this")
        client.take_pending()
        assert await client.request("thread/compact/start", {"threadId": thread_id}) == {}
        started = await client.read_notification("turn/started")
        turn_id = started["turn"]["id"]
        completed = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)
        seen = client.take_pending()
        _, after = await turn(client, thread_id, "and now?")
    assert completed["turn"]["status"] == "completed" and completed["turn"]["items"] == []
    assert [m["method"] for m in seen] == ["thread/status/changed", "item/started", "item/completed",
                                           "thread/compacted", "thread/status/changed"]
    (compaction,) = items(seen, "contextCompaction")
    assert compaction["id"] == f"compaction-{turn_id}-1"
    assert seen[3]["params"] == {"threadId": thread_id, "turnId": turn_id}
    compact_request, next_request = harness.model.requests[1:3]
    assert compact_request["input"] == [{"type": "compaction_trigger"}]
    assert next_request["input"][-2]["type"] == "compaction" and "remember this" in json.dumps(next_request)
    assert items(after, "contextCompaction") == []


async def test_manual_compaction_on_a_busy_thread_runs_after_its_turn_and_refuses_steers(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    release, release_compaction = trio.Event(), trio.Event()

    async def held(conn: FakeConnection, request: Json) -> None:
        await (release_compaction if request["input"][-1] == {"type": "compaction_trigger"} else release).wait()
        await compacting(conn, request)

    async with app_server(tmp_path, held) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        first = await client.request("turn/start", {"threadId": thread_id, "input": text_input("long job")})
        await harness.model.wait_for_request_count(1)
        assert await client.request("thread/compact/start", {"threadId": thread_id}) == {}
        release.set()
        await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == first["turn"]["id"])
        compaction = await client.read_notification("turn/started", lambda p: p["turn"]["id"] != first["turn"]["id"])
        compaction_id = compaction["turn"]["id"]
        with pytest.raises(AppServerError) as caught:
            await client.request("turn/steer", {"threadId": thread_id, "expectedTurnId": compaction_id,
                                                "input": text_input("not during compaction")})
        assert caught.value.code == -32600 and "is a compaction and takes no steers" in caught.value.message
        release_compaction.set()
        done = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == compaction_id)
    assert done["turn"]["status"] == "completed"
    assert harness.model.requests[1]["input"][-1] == {"type": "compaction_trigger"}


async def test_a_failed_manual_compaction_fails_its_turn_and_a_turn_started_meanwhile_runs_after(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    release = trio.Event()

    async def model(conn: FakeConnection, request: Json) -> None:
        if request["input"][-1] == {"type": "compaction_trigger"}:
            await release.wait()
            await conn.send(frames.completed(f"resp-compact-{len(conn.requests)}", []))  # no compaction item
        else:
            await send_message(conn, f"resp-{len(conn.requests)}", "noted")

    async with app_server(tmp_path, model) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await turn(client, thread_id, "remember this")
        assert await client.request("thread/compact/start", {"threadId": thread_id}) == {}
        compaction_id = (await client.read_notification("turn/started"))["turn"]["id"]
        await harness.model.wait_for_request_count(2)
        client.take_pending()
        queued = await client.request("turn/start", {"threadId": thread_id, "input": text_input("next")})
        assert queued["turn"]["id"] != compaction_id  # not a steer: a turn of its own, after the compaction
        release.set()
        failed = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == compaction_id)
        during = client.take_pending()
        after = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == queued["turn"]["id"])
    assert failed["turn"]["status"] == "failed" and "compaction" in failed["turn"]["error"]["message"]
    assert len(items(during, "contextCompaction")) == 1
    assert not [m for m in during if m.get("method") == "thread/compacted"]
    (error,) = [m["params"] for m in during if m.get("method") == "error" and not m["params"]["willRetry"]]
    assert error["turnId"] == compaction_id
    assert [m["params"]["status"] for m in during if m.get("method") == "thread/status/changed"][-1] == {
        "type": "systemError"}
    assert after["turn"]["status"] == "completed"


async def test_model_list(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        result = await client.request("model/list", {})
    default = [model for model in result["data"] if model["isDefault"]]
    assert [model["id"] for model in default] == ["gpt-5.5"] and result["nextCursor"] is None
    assert {"low", "medium", "high"} <= {e["reasoningEffort"] for e in default[0]["supportedReasoningEfforts"]}
