"""Fault matrix, class 2: one fault boundary (issue 8).

Model-, server- and tool-controlled data never raises out of the turn: each known
hostile case becomes a failed tool output (the turn goes on) or a ``TurnFailed`` with
a clear message, and ``open_agent`` never raises.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, scripted
from ._peer import TRANSPORTS, Peer


def tool_results(log: EventLog) -> list[tuple[str, str, Any]]:
    return [(p["call_id"], p["status"], p["result"]) for p in log.payloads("tool.result")]


def output_text(item: dict[str, Any]) -> str:
    output = item["output"]
    if isinstance(output, str):
        return output
    return "".join(part.get("text", "") for part in output)


WAIT_CASES = [
    ({"cell_id": None}, "wait needs a numeric cell_id (as returned by exec), got None"),
    ({"cell_id": 1e400}, "wait needs a numeric cell_id (as returned by exec), got inf"),
    ({"cell_id": "1", "yield_time_ms": 1e400}, "wait: yield_time_ms must be a whole number from 0 to"),
    ({"cell_id": "1", "yield_time_ms": -5}, "wait: yield_time_ms must be a whole number from 0 to"),
    ({"cell_id": "1", "max_tokens": 10**400}, "wait: max_tokens must be a whole number from 0 to"),
    ({"cell_id": "1", "max_tokens": "lots"}, "wait: max_tokens must be a whole number from 0 to"),
    ({"cell_id": True}, "wait needs a numeric cell_id (as returned by exec), got True"),
    ({"cell_id": "1", "terminate": "yes"}, "wait: terminate must be true or false, got 'yes'"),
    ({"cell_id": 99}, "No running cell with ID 99"),
]


@pytest.mark.parametrize(("arguments", "message"), WAIT_CASES, ids=[str(i) for i in range(len(WAIT_CASES))])
async def test_hostile_wait_arguments_are_failed_outputs(
    server: FakeResponsesServer, workspace: Path, arguments: dict[str, Any], message: str
) -> None:
    peer = Peer(server, ta.Transport.WEBSOCKET)
    outputs: list[dict[str, Any]] = []

    async def script() -> None:
        await peer.next_request()
        raw = json.dumps(arguments).replace("Infinity", "1e400")  # keep the model's literal
        await peer.send([frames.completed("resp-1", [frames.function_call("call-w", "wait", raw)])])
        outputs.append((await peer.next_request())["input"][0])
        await peer.send([frames.completed("resp-2", [frames.assistant_message("done")])])

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(peer.config(workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("wait for it")).result()).final_message == "done"
    (output,) = outputs
    assert output["type"] == "function_call_output"
    assert message in output_text(output)
    ((call_id, status, _),) = tool_results(log)
    assert (call_id, status) == ("call-w", "failed")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (b"raw bytes", "Object of type bytes is not JSON serializable"),
        ({1, 2}, "Object of type set is not JSON serializable"),
        ({(1, 2): "tuple key"}, "keys must be str, int, float, bool or None"),
        ("circular", "Circular reference detected"),
        (float("nan"), "Out of range float values are not JSON compliant"),
    ],
    ids=["bytes", "set", "tuple_key", "circular", "nan"],
)
async def test_tool_values_json_cannot_encode_fail_the_call_directly_and_from_js(
    server: FakeResponsesServer, workspace: Path, value: Any, why: str
) -> None:
    if value == "circular":
        circular: list[Any] = []
        circular.append(circular)
        value = circular
    peer = Peer(server, ta.Transport.WEBSOCKET)
    outputs: list[dict[str, Any]] = []

    async def odd(ctx: ta.ToolContext, args: Any) -> Any:
        return value

    async def script() -> None:
        await peer.next_request()
        await peer.send([frames.completed("resp-1", [frames.function_call("call-d", "odd", "{}")])])
        outputs.append((await peer.next_request())["input"][0])
        source = "try { await tools.odd({}); text('no error') } catch (e) { text('rejected: ' + e.message) }"
        await peer.send([frames.completed("resp-2", [frames.custom_tool_call("call-js", "exec", source)])])
        outputs.append((await peer.next_request())["input"][0])
        await peer.send([frames.completed("resp-3", [frames.assistant_message("survived")])])

    tools = ta.Tools.default().function("odd", "Returns an odd value.", {"type": "object"}, odd)
    async with scripted(script, 20), ta.open_agent(peer.config(workspace, tools=tools)) as agent:
        assert (await (await agent.prompt("call odd")).result()).final_message == "survived"
    direct, from_js = outputs
    assert output_text(direct).startswith("tool odd returned a value JSON cannot encode")
    assert why in output_text(direct)
    assert "rejected: tool odd returned a value JSON cannot encode" in output_text(from_js)


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
async def test_lone_surrogates_survive_replay_rollout_and_jsonl(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path, transport: ta.Transport
) -> None:
    """One policy: a lone surrogate becomes U+FFFD wherever JSON leaves the process."""
    peer = Peer(server, transport)
    bodies: list[dict[str, Any]] = []
    fs_name = os.fsdecode(b"caf\xe9.txt")  # 'caf\udce9.txt': a file name that is not UTF-8
    assert "\udce9" in fs_name

    async def script() -> None:
        bodies.append(await peer.next_request())
        # The server's text holds an escaped lone surrogate; the JS tool makes another.
        call = frames.custom_tool_call("call-js", "exec", 'text("js \\ud800 text")')
        message = '{"type":"message","role":"assistant","content":[{"type":"output_text","text":"srv \\udfff"}]}'
        completed = '{"type":"response.completed","response":{"id":"resp-1","output":[' + message + ","
        completed += json.dumps(call) + "]}}"
        await peer.send([completed])
        bodies.append(await peer.next_request())
        await peer.send([frames.completed("resp-2", [frames.assistant_message("fine")])])

    out = io.StringIO()
    config = peer.config(workspace, rollout=ta.RolloutConfig(tmp_path / "home"),
                         responses={"history": ta.History.FULL_REPLAY} if not peer.websocket else None)
    async with scripted(script) as nursery, ta.open_agent(config) as agent:
        nursery.start_soon(ta.write_jsonl, agent.events, out)
        result = await (await agent.prompt(f"read {fs_name}")).result()
    assert result.final_message == "fine"
    first_text = json.dumps(bodies[0], ensure_ascii=False)
    assert "read caf\ufffd.txt" in first_text
    second_text = json.dumps(bodies[1], ensure_ascii=False)
    assert "js \ufffd text" in second_text
    if not peer.websocket:  # full replay: the server's own text went back, made valid
        assert "srv \ufffd" in second_text
    lines = out.getvalue().splitlines()
    assert lines and all(json.loads(line) for line in lines)  # every line is valid JSON (UTF-8)
    loaded = ta.RolloutConfig(tmp_path / "home").load_session("faults").snapshot.history
    assert "caf\ufffd.txt" in json.dumps(loaded, ensure_ascii=False)
    assert len(loaded) == len(result.snapshot().history)


async def test_a_nul_byte_in_an_apply_patch_path_is_a_failed_call(server: FakeResponsesServer, workspace: Path) -> None:
    peer = Peer(server, ta.Transport.WEBSOCKET)
    outputs: list[dict[str, Any]] = []
    patch = "*** Begin Patch\\n*** Add File: evil\\u0000name.txt\\n+x\\n*** End Patch"
    source = f'try {{ await tools.apply_patch("{patch}"); text("applied") }} '
    source += 'catch (e) { text("refused: " + e.message) }'

    async def script() -> None:
        await peer.next_request()
        await peer.send([frames.completed("resp-1", [frames.custom_tool_call("call-p", "exec", source)])])
        outputs.append((await peer.next_request())["input"][0])
        await peer.send([frames.completed("resp-2", [frames.assistant_message("ok")])])

    async with scripted(script), ta.open_agent(peer.config(workspace)) as agent:
        assert (await (await agent.prompt("patch")).result()).final_message == "ok"
    assert "refused: Refusing path 'evil\\x00name.txt': it contains a NUL or control character" in output_text(
        outputs[0])
    assert list(workspace.iterdir()) == []


@pytest.mark.parametrize(
    ("retry_after", "expected_delay"),
    [("1e400", 60.0), ("1e300", 60.0), ("-3", None), ('"NaN"', None), ("true", None), ('"soon"', None),
     ("12", 12.0)],
    ids=["inf", "1e300", "negative", "nan_text", "bool", "text", "plain"],
)
async def test_hostile_retry_after_values_are_clamped(
    server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock,
    retry_after: str, expected_delay: float | None,
) -> None:
    """``retry_after`` as the raw JSON the server wrote: huge values are capped at the
    documented 60 s, unusable ones mean "no server delay" (the computed backoff)."""
    from trio_agent._transport.retry import backoff_delay

    peer = Peer(server, ta.Transport.WEBSOCKET)
    gaps: list[float] = []

    async def script() -> None:
        await peer.next_request()
        sent = trio.current_time()
        error = '{"type":"error","error":{"message":"busy","code":"server_is_overloaded","retry_after":'
        error += retry_after + "}}"
        await peer.send([error])
        await peer.next_request(new_connection=True)
        gaps.append(trio.current_time() - sent)
        await peer.send([frames.completed("resp-2", [frames.assistant_message("after the wait")])])

    async with scripted(script, 200), ta.open_agent(peer.config(workspace)) as agent:
        assert (await (await agent.prompt("go")).result()).final_message == "after the wait"
    expected = expected_delay if expected_delay is not None else backoff_delay(1, call_index=1)
    assert gaps == [pytest.approx(expected, abs=1e-9)]
