"""Typed user tools over the real WebSocket path: the wire definition, top-level and
nested calls, and bad arguments answered as failed results that name the field."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent.testing import FakeResponsesServer, frames

from ..conftest import EventLog, make_config, scripted, warm


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


def _tools(calls: list[Any]) -> ta.Tools:
    @ta.tool
    async def convert(ctx: ta.ToolContext, degrees: float, to: Unit) -> dict[str, float | str]:
        """Convert a temperature.

        Args:
            degrees: The temperature in the other unit.
            to: The unit to convert to.
        """
        calls.append((ctx.call_id, degrees, to))
        value = degrees * 9 / 5 + 32 if to is Unit.FAHRENHEIT else (degrees - 32) * 5 / 9
        return {"value": round(value, 1), "unit": to.value}

    return ta.Tools.default().add(convert)


async def test_a_typed_tool_is_strict_on_the_wire_and_its_arguments_are_checked(
    server: FakeResponsesServer, workspace: Path
) -> None:
    calls: list[Any] = []

    async def script() -> None:
        conn = await warm(server)
        (definition,) = [t for t in server.connections[0].requests[0]["input"][0]["tools"] if t["name"] == "convert"]
        assert definition == {
            "type": "function", "name": "convert", "description": "Convert a temperature.", "strict": True,
            "parameters": {
                "type": "object",
                "properties": {
                    "degrees": {"type": "number", "description": "The temperature in the other unit."},
                    "to": {"type": "string", "enum": ["celsius", "fahrenheit"],
                           "description": "The unit to convert to."},
                },
                "required": ["degrees", "to"],
                "additionalProperties": False,
            },
        }
        await conn.next_request()
        await conn.send_completed("resp-1", [
            frames.function_call("call-good", "convert", json.dumps({"degrees": 100, "to": "fahrenheit"})),
            frames.function_call("call-bad", "convert", json.dumps({"degrees": "hot", "to": "kelvin", "x": 1})),
        ])
        outputs = (await conn.next_request())["input"]
        assert outputs[0] == {**outputs[0], "call_id": "call-good", "output": '{"value":212.0,"unit":"fahrenheit"}'}
        assert outputs[1]["call_id"] == "call-bad"
        assert outputs[1]["output"] == (
            'invalid arguments for tool convert: x: unexpected field (the fields are: degrees, to); '
            'degrees: expected a number, got "hot"; to: expected one of "celsius", "fahrenheit", got "kelvin"'
        )
        source = (
            "const ok = await tools.convert({degrees: 212, to: 'celsius'});\n"
            "text(ok.value);\n"
            "try { await tools.convert({degrees: 1}); } catch (e) { text(e.message); }"
        )
        await conn.send_tool_call("resp-2", "call-exec", "exec", source)
        exec_output = (await conn.next_request())["input"][0]["output"]
        assert exec_output[1:] == [
            {"type": "input_text", "text": "100"},
            {"type": "input_text", "text": "invalid arguments for tool convert: to: required field is missing"},
        ]
        await conn.send_final("resp-final")

    log = EventLog()
    async with scripted(script) as nursery:
        async with ta.open_agent(make_config(server, workspace, tools=_tools(calls))) as agent:
            nursery.start_soon(log.consume, agent.events)
            await (await agent.prompt("convert")).result()
    # The handler ran for the good calls only, with converted arguments.
    assert calls == [("call-good", 100.0, Unit.FAHRENHEIT), ("call-exec/code-1", 212.0, Unit.CELSIUS)]
    results = {p["call_id"]: p["status"] for p in log.payloads("tool.result")}
    assert results == {"call-good": "completed", "call-bad": "failed", "call-exec/code-1": "completed",
                       "call-exec/code-2": "failed", "call-exec": "completed"}
