"""Fault matrix: hostile arguments for typed tools (pydantic models, ``Annotated``
bounds, recursive classes, sync tools), over both transports and from ``exec``.

Each call is answered with a failed result that names the field and what was wrong,
the tool's own code never runs, the turn goes on to its one terminal event, and every
call has its output in the next request.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import annotated_types as at
import pydantic
import pytest

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, scripted
from ._peer import TRANSPORTS, Peer


class Shipment(pydantic.BaseModel):
    weight_kg: float = pydantic.Field(gt=0, le=1000)
    label: str = pydantic.Field(min_length=1, max_length=20)


@dataclasses.dataclass
class Branch:
    name: str
    branches: list[Branch]


class Tree(pydantic.BaseModel):
    name: str
    children: list[Tree]


RAN: list[str] = []


@ta.tool
async def ship(shipment: Shipment, count: Annotated[int, at.Ge(1), at.Le(10)]) -> str:
    """Ship parcels."""
    RAN.append("ship")
    return "shipped"


@ta.tool
async def grow(branch: Branch, tree: Tree | None = None) -> str:
    """Grow a tree."""
    RAN.append("grow")
    return "grown"


@ta.tool
def weigh(grams: int, tolerance: float = 0.1) -> int:
    """Weigh (sync: runs in a thread)."""
    RAN.append("weigh")
    raise RuntimeError(f"scale broken at {grams} g")


def _nested(depth: int, leaf: dict[str, Any]) -> dict[str, Any]:
    node = leaf
    for _ in range(depth):
        node = {"name": "n", "branches": [node]}
    return node


def _tree(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"name": "leaf", "children": []}
    for _ in range(depth):
        node = {"name": "n", "children": [node]}
    return node


# (tool, raw JSON arguments, what the failed output must say)
CASES = [
    ("ship", '{"shipment": {"weight_kg": "heavy", "label": "a"}, "count": 1}',
     "shipment.weight_kg: Input should be a valid number"),
    ("ship", '{"shipment": {"weight_kg": 1, "label": "a", "insured": true}, "count": 1}',
     "shipment.insured: unexpected field (the fields are: weight_kg, label)"),
    ("ship", '{"shipment": {"weight_kg": 1, "label": "a"}, "count": 99}', "count: must be <= 10, got 99"),
    ("ship", '{"shipment": {"weight_kg": 1, "label": "a"}, "count": ' + "9" * 400 + "}", "count: must be <= 10"),
    ("ship", '{"shipment": {"weight_kg": 1e400, "label": "a"}, "count": 1}', "shipment.weight_kg: "),
    ("ship", '{"shipment": {"weight_kg": -1, "label": ""}, "count": 1.5}', "count: expected an integer, got 1.5"),
    ("ship", '{"shipment": [], "count": 1}', "shipment: Input should be"),
    ("ship", '{"shipment": {"weight_kg": 1, "label": "a"}, "count": 1, "priority": "now"}',
     "priority: unexpected field (the fields are: shipment, count)"),
    ("grow", json.dumps({"branch": _nested(200, {"name": "leaf", "branches": []})}),
     "nests too deeply (at most 64 levels)"),
    ("grow", json.dumps({"branch": {"name": "b", "branches": []}, "tree": _tree(400)}), "tree: nests too deeply"),
    ("grow", json.dumps({"branch": _nested(3, {"name": 7, "branches": [], "x": 1})}),
     "branch.branches[0].branches[0].branches[0].name: expected a string, got 7"),
    ("weigh", '{"grams": "a lot"}', 'grams: expected an integer, got "a lot"'),
    ("weigh", '{"grams": 1, "tolerance": 1e400}', "tolerance: expected a finite number"),
    ("weigh", '{"grams": 1, "tolerance": 1' + "0" * 400 + "}", "tolerance: expected a finite number"),
]


@pytest.mark.parametrize("transport", TRANSPORTS, ids=lambda t: t.name.lower())
async def test_hostile_typed_tool_arguments_are_failed_results(
    server: FakeResponsesServer, workspace: Path, transport: ta.Transport
) -> None:
    peer = Peer(server, transport)
    continuation: list[dict[str, Any]] = []
    calls = [frames.function_call(f"call-{i}", name, arguments) for i, (name, arguments, _) in enumerate(CASES)]
    RAN.clear()

    async def script() -> None:
        await peer.next_request()
        await peer.send([frames.completed("resp-1", calls)])
        continuation.append(await peer.next_request())
        await peer.send([frames.completed("resp-2", [frames.assistant_message("survived")])])

    tools = ta.Tools.default().add(ship).add(grow).add(weigh)
    log = EventLog()
    async with scripted(script, 30) as nursery, ta.open_agent(peer.config(workspace, tools=tools)) as agent:
        nursery.start_soon(log.consume, agent.events)
        assert (await (await agent.prompt("ship it")).result()).final_message == "survived"
    assert RAN == []  # no hostile call reached a tool's code
    outputs = {item["call_id"]: item["output"] for item in continuation[0]["input"]
               if item.get("type") == "function_call_output"}
    assert list(outputs) == [f"call-{i}" for i in range(len(CASES))]  # every call answered, in order
    for i, (name, _, expected) in enumerate(CASES):
        text = outputs[f"call-{i}"]
        assert text.startswith(f"invalid arguments for tool {name}: "), text
        assert expected in text, (expected, text)
    statuses = [p["status"] for p in log.payloads("tool.result")]
    assert statuses == ["failed"] * len(CASES)
    assert [e.kind for e in log.events if e.kind.is_terminal] == [ta.EventKind.RUN_COMPLETED]


async def test_typed_tool_faults_from_exec_reject_the_promise(server: FakeResponsesServer, workspace: Path) -> None:
    peer = Peer(server, ta.Transport.WEBSOCKET)
    outputs: list[str] = []
    source = (
        "for (const args of [{shipment: {weight_kg: 5, label: 'x'}, count: 11}, {grams: 3}]) {"
        " const tool = 'count' in args ? tools.ship : tools.weigh;"
        " try { await tool(args); text('no error') } catch (e) { text('rejected: ' + e.message) } }"
    )
    RAN.clear()

    async def script() -> None:
        await peer.next_request()
        await peer.send([frames.completed("resp-1", [frames.custom_tool_call("call-js", "exec", source)])])
        body = await peer.next_request()
        outputs.append(json.dumps(body["input"][0]))
        await peer.send([frames.completed("resp-2", [frames.assistant_message("survived")])])

    tools = ta.Tools.default().add(ship).add(weigh)
    async with scripted(script, 30), ta.open_agent(peer.config(workspace, tools=tools)) as agent:
        assert (await (await agent.prompt("ship it")).result()).final_message == "survived"
    (text,) = outputs
    assert "rejected: invalid arguments for tool ship: count: must be <= 10, got 11" in text
    assert "rejected: tool weigh failed: RuntimeError: scale broken at 3 g" in text
    assert RAN == ["weigh"]  # the sync tool ran (in its thread) and its failure was answered
