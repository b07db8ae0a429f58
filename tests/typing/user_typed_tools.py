"""A user's tools file with pydantic models, ``Annotated`` constraints and sync
functions; type-checked (``mypy --strict``, by ``test_testing_kit_typing.py``, which also builds its tools).

Each decorated function stays a ``ta.ToolSpec`` to the checker, raw sync handlers are
accepted where async ones are, and the blocking warning's payload is typed.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Annotated, assert_type

import annotated_types as at
import pydantic

import trio_agent as ta


class Address(pydantic.BaseModel):
    street: str = pydantic.Field(min_length=3, description="The street and number.")
    city: str


class Order(pydantic.BaseModel):
    id: uuid.UUID
    placed: dt.datetime
    total: Decimal
    ship_to: Address
    lines: list[Annotated[int, at.Ge(1)]]


@ta.tool
async def place(
    ctx: ta.ToolContext,
    order: Order,
    priority: Annotated[int, at.Ge(1), at.Le(5)] = 3,
    note: Annotated[str, pydantic.Field(max_length=200, description="For the courier.")] = "",
) -> Order:
    """Place an order."""
    ctx.report(f"placing {order.id}")
    return order


@ta.tool(name="read_manifest")
def read(path: Path, pair: tuple[int, str], limit: int = pydantic.Field(10, le=100)) -> list[str]:
    """Read a manifest (sync: runs in a worker thread)."""
    return path.read_text().splitlines()[:limit]


def lookup(ctx: ta.ToolContext, args: dict[str, ta.JsonValue]) -> str:
    """A raw sync handler: run in a worker thread."""
    return str(args.get("key"))


def tools() -> ta.Tools:
    assert_type(place, ta.ToolSpec)
    assert_type(read, ta.ToolSpec)
    tools = (
        ta.Tools.default()
        .add(place)
        .add(read)
        .function("lookup", "Look a key up.", {"type": "object"}, lookup)
        .with_blocking_warning(0.05)
    )
    assert_type(tools.blocking_threshold, float | None)
    return tools


def blocked(event: ta.AgentEvent) -> float | None:
    payload = ta.payload_of(event, ta.EventKind.TOOL_BLOCKED)
    if payload is None:
        return None
    assert_type(payload["tool"], str)
    return payload["blocked_ms"]
