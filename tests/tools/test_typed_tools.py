"""Typed user tools: schemas from type hints and docstrings, validation before the call."""

from __future__ import annotations

import dataclasses
import enum
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import attrs
import pytest
import trio

import trio_agent as ta
from trio_agent._tools import InvalidToolArguments
from trio_agent._tools._docstrings import parse_docstring


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


@attrs.frozen
class Box:
    label: str
    _size: float = attrs.field(alias="size", default=1.0)


class Filter(TypedDict):
    field: str
    value: NotRequired[Annotated[str, "Match this value."]]


async def grep(pattern: str, path: str = ".", max_results: int = 50) -> list[str]:
    """Search files for a regular expression.

    The search is recursive.

    Args:
        pattern: The regular expression.
        path: Directory to search, relative
            to the workspace.
        max_results (int): At most this many matches.
    """
    return [pattern, path, str(max_results)]


async def everything(
    ctx: ta.ToolContext,
    color: Color,
    mode: Literal["fast", "slow"],
    point: Point,
    box: Box,
    filters: list[Filter],
    weights: dict[str, float],
    note: str | None = None,
) -> dict[str, Any]:
    """Take every kind of argument."""
    return {"ctx": ctx.tool, "color": color, "mode": mode, "point": point, "box": box, "filters": filters,
            "weights": weights, "note": note}


def context(tool: str = "t") -> ta.ToolContext:
    return ta.ToolContext("call-1", tool, Path("."), None, progress=lambda message: None)  # type: ignore[arg-type]


def test_the_schema_comes_from_hints_and_the_docstring() -> None:
    spec = ta.tool(grep)
    assert isinstance(spec, ta.ToolSpec)
    assert spec.name == "grep" and spec.kind == "function"
    assert spec.description == "Search files for a regular expression.\n\nThe search is recursive."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression."},
            "path": {"type": "string", "description": "Directory to search, relative to the workspace.",
                     "default": "."},
            "max_results": {"type": "integer", "description": "At most this many matches.", "default": 50},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    assert spec.output_schema == {"type": "array", "items": {"type": "string"}}
    assert spec.strict is False  # optional parameters: not expressible in strict mode
    definition = spec.definition()
    assert definition["strict"] is False and definition["parameters"] == spec.parameters


def test_a_schema_with_only_required_fields_is_strict() -> None:
    async def move(point: Point, color: Color) -> None:
        """Move a point."""

    spec = ta.tool(move)
    assert spec.strict is False  # Point.y has a default
    async def paint(color: Color, mode: Literal["fast", "slow"], filters: list[Filter]) -> None:
        """Paint."""

    assert ta.tool(paint).strict is False  # Filter.value is NotRequired

    async def label(text: str, sizes: list[int], kind: Literal["a", "b"]) -> str:
        """Label things."""
        return text

    strict = ta.tool(label)
    assert strict.strict is True
    assert strict.definition()["strict"] is True
    assert strict.parameters is not None and strict.parameters["required"] == ["text", "sizes", "kind"]


def test_nested_types_become_closed_objects() -> None:
    spec = ta.tool(everything)
    params = spec.parameters
    assert params is not None
    props = params["properties"]
    assert isinstance(props, dict)
    assert "ctx" not in props  # the context is injected, not an argument
    assert props["color"] == {"type": "string", "enum": ["red", "blue"]}
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert props["point"] == {
        "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"], "additionalProperties": False,
    }
    assert props["box"] == {
        "type": "object", "properties": {"label": {"type": "string"}, "size": {"type": "number", "default": 1.0}},
        "required": ["label"], "additionalProperties": False,
    }
    assert props["filters"] == {"type": "array", "items": {
        "type": "object",
        "properties": {"field": {"type": "string"}, "value": {"type": "string", "description": "Match this value."}},
        "required": ["field"], "additionalProperties": False,
    }}
    assert props["weights"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert params["required"] == ["color", "mode", "point", "box", "filters", "weights"]


async def test_arguments_are_converted_before_the_function_runs() -> None:
    spec = ta.tool(everything)
    value = await spec.handler(context("everything"), {  # type: ignore[arg-type]
        "color": "blue", "mode": "fast", "point": {"x": 3.0}, "box": {"label": "b", "size": 2},
        "filters": [{"field": "f"}], "weights": {"a": 1},
    })
    assert value == {
        "ctx": "everything", "color": "blue", "mode": "fast", "point": {"x": 3, "y": 0},
        "box": {"label": "b", "size": 2.0}, "filters": [{"field": "f"}], "weights": {"a": 1.0}, "note": None,
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "pattern: required field is missing"),
        ({"pattern": 42}, "pattern: expected a string, got 42"),
        ({"pattern": "x", "max_results": "10"}, 'max_results: expected an integer, got "10"'),
        ({"pattern": "x", "max_results": 1.5}, "max_results: expected an integer, got 1.5"),
        ({"pattern": "x", "max_results": True}, "max_results: expected an integer, got true"),
        ({"pattern": "x", "patern": "y"}, "patern: unexpected field (the fields are: pattern, path, max_results)"),
        ([1, 2], "arguments: expected an object, got [1, 2]"),
    ],
)
async def test_bad_arguments_name_the_field_and_the_problem(arguments: Any, message: str) -> None:
    spec = ta.tool(grep)
    with pytest.raises(InvalidToolArguments) as info:
        await spec.handler(context(), arguments)
    assert message in info.value.message


async def test_nested_errors_have_paths_and_all_of_them_are_reported() -> None:
    spec = ta.tool(everything)
    with pytest.raises(InvalidToolArguments) as info:
        await spec.handler(context(), {  # type: ignore[arg-type]
            "color": "green", "mode": "fast", "point": {"x": "1", "z": 0}, "box": {"label": "b"},
            "filters": [{"field": "f"}, {"value": "v"}], "weights": {"a": "heavy"},
        })
    message = info.value.message
    for part in ('color: expected one of "red", "blue", got "green"', 'point.x: expected an integer, got "1"',
                 "point.z: unexpected field", "filters[1].field: required field is missing",
                 'weights.a: expected a number, got "heavy"'):
        assert part in message
    assert "box" not in message  # box.size has a default


@dataclasses.dataclass
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError("n must be positive")


async def test_a_dataclass_that_refuses_its_values_is_a_validation_error() -> None:
    async def count(p: Positive) -> int:
        """Count."""
        return p.n

    spec = ta.tool(count)
    with pytest.raises(InvalidToolArguments, match="p: ValueError: n must be positive"):
        await spec.handler(context(), {"p": {"n": 0}})  # type: ignore[arg-type]
    assert await spec.handler(context(), {"p": {"n": 2}}) == 2  # type: ignore[arg-type]


def test_the_decorator_takes_a_name_and_a_description() -> None:
    @ta.tool(name="search_files", description="Find files.")
    async def whatever(query: str) -> str:
        return query

    assert (whatever.name, whatever.description) == ("search_files", "Find files.")
    tools = ta.Tools.default().add(whatever)
    assert tools.user_tool("search_files") is whatever
    renamed = ta.Tools.default().add(whatever, name="find")
    spec = renamed.user_tool("find")
    assert spec is not None and spec.description == "Find files."


def test_a_type_only_defined_locally_cannot_be_resolved() -> None:
    class Local(TypedDict):
        a: int

    async def f(x: Local) -> None:
        """Local."""

    with pytest.raises(ta.ConfigError, match="define the types it uses at module level"):
        ta.tool(f)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("async def f(x):\n    'No hints.'", "parameter 'x' has no type annotation"),
        ("async def f(*xs: int):\n    'Star.'", "must be an ordinary named parameter"),
        ("async def f(x: int, /):\n    'Positional.'", "must be an ordinary named parameter"),
        ("async def f(x: int):\n    pass", "needs a description"),
        ("class Opaque: pass\nasync def f(x: Opaque):\n    'Opaque.'", "has no JSON form"),
        ("f = 3", "expected a function, got int"),
        ("async def f(x: dict[int, str]):\n    'Int keys.'", "dict keys must be str"),
        ("import typing, pydantic\nasync def f(x: typing.Annotated[str, pydantic.Field(pattern='(')]):\n    'P.'",
         "the pattern '\\(' is not a regular expression"),
        ("async def f(x: 'Missing'):\n    'Unresolvable.'", "annotation 'Missing' cannot be resolved"),
    ],
)
def test_functions_that_cannot_be_described_are_refused(source: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ta.ConfigError, match=message):
        ta.tool(namespace["f"])


def test_add_takes_a_plain_async_function_too() -> None:
    tools = ta.Tools.default().add(grep, description="Grep.")
    spec = tools.user_tool("grep")
    assert spec is not None and spec.description == "Grep."
    assert spec.parameters == ta.tool(grep).parameters
    assert [d["name"] for d in tools.definitions()] == ["exec", "wait", "grep"]
    with pytest.raises(ta.ConfigError, match="registered twice"):
        tools.add(grep)


def test_names_may_not_collide_with_enabled_builtins() -> None:
    async def web__run(q: str) -> str:
        """Mine."""
        return q

    async def update_plan(q: str) -> str:
        """Mine."""
        return q

    with pytest.raises(ta.ConfigError, match="'web__run' is taken by a built-in tool"):
        ta.Tools.default().add(web__run)
    ta.Tools.default().without_web_search().add(web__run)  # off: the name is free
    with pytest.raises(ta.ConfigError, match="'update_plan' is taken by a built-in tool"):
        ta.Tools.default().add(update_plan)
    assert ta.Tools.empty().add(update_plan).user_tool("update_plan") is not None  # no built-ins at all
    with pytest.raises(ta.ConfigError, match="'image_gen__imagegen' is taken"):
        ta.Tools.default().with_image_generation().add(ta.tool(update_plan, name="image_gen__imagegen"))
    with pytest.raises(ta.ConfigError, match="would collide with your tool"):
        ta.Tools.default().add(ta.tool(update_plan, name="image_gen__imagegen")).with_image_generation()
    with pytest.raises(ta.ConfigError, match="'tool_search' is taken"):
        ta.Tools.default().with_mcp("s", ta.McpServer.stdio("x")).add(ta.tool(update_plan, name="tool_search"))
    with pytest.raises(ta.ConfigError, match="starts with 'mcp__'"):
        ta.Tools.default().add(ta.tool(update_plan, name="mcp__a__b"))


@pytest.mark.parametrize(
    ("doc", "summary", "params"),
    [
        ("Do it.\n\n:param a: The a.\n:param int b: The b,\n    continued.\n:returns: x", "Do it.",
         {"a": "The a.", "b": "The b, continued."}),
        ("Do it.\n\nParameters\n----------\na : int\n    The a.\nb\n    The b.\n", "Do it.",
         {"a": "The a.", "b": "The b."}),
        ("Summary line.\n\nMore.\n\nReturns:\n    nothing", "Summary line.\n\nMore.", {}),
        (None, "", {}),
    ],
)
def test_docstring_styles(doc: str | None, summary: str, params: dict[str, str]) -> None:
    assert parse_docstring(doc) == (summary, params)


def test_validation_is_imported_only_when_a_typed_tool_is_made() -> None:
    code = (
        "import sys, trio_agent as ta\n"
        "lazy = ('trio_agent._tools._typed', 'trio_agent._tools._schema', 'trio_agent._tools._docstrings')\n"
        "assert not any(m in sys.modules for m in lazy)\n"
        "ta.Tools.default()\n"
        "assert not any(m in sys.modules for m in lazy)\n"
        "async def f(x: int) -> int:\n    'F.'\n    return x\n"
        "ta.tool(f)\n"
        "assert 'trio_agent._tools._typed' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_a_typed_tool_may_checkpoint_and_use_its_context() -> None:
    @ta.tool
    async def slow(ctx: ta.ToolContext, n: int) -> str:
        """Sleep a little."""
        await trio.lowlevel.checkpoint()
        return f"{ctx.call_id}:{n}"

    assert await slow.handler(context(), {"n": 1}) == "call-1:1"  # type: ignore[arg-type]
