"""Typed tools beyond the JSON scalars: standard-library values as formatted strings,
tuples, recursive classes, ``Annotated`` constraints, pydantic models and
``TypeAdapter`` types; the schema says each, the handler enforces it, and ``strict`` is
set only when OpenAI's strict mode can take the schema."""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, TypedDict

import annotated_types as at
import pydantic
import pytest

import trio_agent as ta
from trio_agent._tools import InvalidToolArguments
from trio_agent._tools._strict import strict_compatible


def _context() -> ta.ToolContext:
    return ta.ToolContext("call-1", "t", Path("."), None, progress=lambda message: None)  # type: ignore[arg-type]


async def _call(spec: ta.ToolSpec, arguments: dict[str, Any]) -> object:
    return await spec.handler(_context(), arguments)  # type: ignore[arg-type]


async def _errors(spec: ta.ToolSpec, arguments: dict[str, Any]) -> str:
    with pytest.raises(InvalidToolArguments) as info:
        await _call(spec, arguments)
    return info.value.message


def _props(spec: ta.ToolSpec) -> dict[str, Any]:
    assert spec.parameters is not None
    props = spec.parameters["properties"]
    assert isinstance(props, dict)
    return props


# -- standard-library values ---------------------------------------------------------------


async def when(at_time: dt.datetime, day: dt.date, hour: dt.time, id: uuid.UUID, path: Path, amount: Decimal,
               pair: tuple[int, str]) -> dict[str, Any]:
    """Take every formatted value."""
    return {"at_time": at_time, "day": day, "hour": hour, "id": id, "path": path, "amount": amount, "pair": pair}


def test_standard_library_values_are_strings_with_a_format() -> None:
    props = _props(ta.tool(when))
    assert props["at_time"] == {"type": "string", "format": "date-time"}
    assert props["day"] == {"type": "string", "format": "date"}
    assert props["hour"] == {"type": "string", "format": "time"}
    assert props["id"] == {"type": "string", "format": "uuid"}
    assert props["path"] == {"type": "string"}
    assert props["amount"]["type"] == "string" and "pattern" in props["amount"]
    assert props["pair"] == {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                             "items": False, "minItems": 2, "maxItems": 2}
    assert ta.tool(when).strict is False  # prefixItems is not in strict mode
    exec_description = ta.Tools.default().add(when).definitions()[0]["description"]
    assert "id: string; path: string; amount: string; pair: [number, string] }" in exec_description


async def test_formatted_values_are_converted_and_returned_as_json() -> None:
    spec = ta.tool(when)
    ident = uuid.uuid4()
    arguments = {"at_time": "2024-05-06T07:08:09+00:00", "day": "2024-05-06", "hour": "07:08", "id": str(ident),
                 "path": "src/app.py", "amount": "0.10", "pair": [1, "a"]}
    assert await _call(spec, arguments) == {
        "at_time": "2024-05-06T07:08:09+00:00", "day": "2024-05-06", "hour": "07:08:00", "id": str(ident),
        "path": "src/app.py", "amount": "0.10", "pair": [1, "a"],
    }
    message = await _errors(spec, {**arguments, "at_time": "yesterday", "id": "x", "amount": "NaN", "pair": [1],
                                   "day": 20240506})
    for part in ('at_time: expected an ISO 8601 date-time string, got "yesterday"', 'id: expected a UUID string',
                 'amount: expected a decimal number string, got "NaN"', "pair: expected an array of 2 items, got [1]",
                 "day: expected an ISO 8601 date string, got 20240506"):
        assert part in message


# -- constraints -----------------------------------------------------------------------------


async def pick(
    n: Annotated[int, at.Ge(1), at.Le(10)],
    ratio: Annotated[float, at.Interval(gt=0, lt=1)],
    tags: Annotated[list[str], at.MaxLen(2)],
    name: Annotated[str, pydantic.Field(min_length=2, pattern=r"^[a-z]+$", description="A lower-case name.")],
    step: int = pydantic.Field(5, multiple_of=5, description="A multiple of five."),
) -> int:
    """Pick."""
    return n


def test_constraints_are_in_the_schema() -> None:
    spec = ta.tool(pick)
    props = _props(spec)
    assert props["n"] == {"type": "integer", "minimum": 1, "maximum": 10}
    assert props["ratio"] == {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "maxItems": 2}
    assert props["name"] == {"type": "string", "minLength": 2, "pattern": "^[a-z]+$",
                             "description": "A lower-case name."}
    assert props["step"] == {"type": "integer", "multipleOf": 5, "description": "A multiple of five.", "default": 5}
    assert spec.parameters is not None and spec.parameters["required"] == ["n", "ratio", "tags", "name"]


async def test_constraints_are_enforced_naming_the_field_and_the_bound() -> None:
    spec = ta.tool(pick)
    good = {"n": 10, "ratio": 0.5, "tags": ["a"], "name": "ab"}
    assert await _call(spec, good) == 10
    assert await _errors(spec, {**good, "n": 99}) == "n: must be <= 10, got 99"
    message = await _errors(spec, {"n": 0, "ratio": 1, "tags": ["a", "b", "c"], "name": "A", "step": 7})
    for part in ("n: must be >= 1, got 0", "ratio: must be < 1, got 1", "tags: must have at most 2 items, got 3",
                 "name: must have at least 2 characters, got 1", "step: must be a multiple of 5, got 7"):
        assert part in message
    assert await _errors(spec, {**good, "name": "AB"}) == "name: must match the pattern '^[a-z]+$', got \"AB\""


async def test_a_constraint_only_pydantic_understands_is_left_to_pydantic_not_dropped() -> None:
    async def even(n: Annotated[int, at.Predicate(lambda v: v % 2 == 0)]) -> int:
        """Even."""
        return n

    spec = ta.tool(even)
    assert await _call(spec, {"n": 4}) == 4
    assert "n: Predicate" in await _errors(spec, {"n": 3})


def test_strict_is_kept_for_constraints_strict_mode_has() -> None:
    async def bounded(n: Annotated[int, at.Ge(1), at.Le(10)], items: Annotated[list[int], at.MinLen(1)]) -> None:
        """Bounded."""

    async def long(text: Annotated[str, at.MaxLen(5)]) -> None:
        """Long."""

    assert ta.tool(bounded).strict is True
    assert ta.tool(long).strict is False  # maxLength is not in strict mode


# -- recursion ------------------------------------------------------------------------------


@dataclasses.dataclass
class Folder:
    name: str
    children: list[Folder]


class Comment(TypedDict):
    text: str
    replies: list[Comment]


async def walk(root: Folder, thread: Comment) -> int:
    """Walk a tree."""
    def count(folder: Folder) -> int:
        return 1 + sum(count(c) for c in folder.children)
    return count(root)


async def test_recursive_classes_are_refs_into_defs() -> None:
    spec = ta.tool(walk)
    params = spec.parameters
    assert params is not None
    assert _props(spec) == {"root": {"$ref": "#/$defs/Folder"}, "thread": {"$ref": "#/$defs/Comment"}}
    assert params["$defs"] == {
        "Folder": {"type": "object", "properties": {"name": {"type": "string"},
                                                    "children": {"type": "array", "items": {"$ref": "#/$defs/Folder"}}},
                   "required": ["name", "children"], "additionalProperties": False},
        "Comment": {"type": "object", "properties": {"text": {"type": "string"},
                                                     "replies": {"type": "array",
                                                                 "items": {"$ref": "#/$defs/Comment"}}},
                    "required": ["text", "replies"], "additionalProperties": False},
    }
    assert spec.strict is True  # $defs/$ref, recursion included, are in strict mode
    tree = {"name": "a", "children": [{"name": "b", "children": []}, {"name": "c", "children": []}]}
    assert await _call(spec, {"root": tree, "thread": {"text": "t", "replies": []}}) == 3
    message = await _errors(spec, {"root": {"name": "a", "children": [{"name": 1, "children": [], "x": 0}]},
                                   "thread": {"text": "t", "replies": [{"text": "u"}]}})
    for part in ("root.children[0].name: expected a string, got 1", "root.children[0].x: unexpected field",
                 "thread.replies[0].replies: required field is missing"):
        assert part in message


# -- pydantic ---------------------------------------------------------------------------------


class Address(pydantic.BaseModel):
    street: str = pydantic.Field(min_length=3, description="The street.")
    number: int = pydantic.Field(ge=1)


class Category(pydantic.BaseModel):
    title: str
    subcategories: list[Category]


class Order(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True)
    placed: dt.date
    to: Address


async def ship(order: Order, tree: Category, window: dt.timedelta) -> Order:
    """Ship an order."""
    return order


def test_pydantic_models_keep_their_schema_with_defs_at_the_root() -> None:
    spec = ta.tool(ship)
    params = spec.parameters
    assert params is not None
    props = _props(spec)
    assert props["order"]["title"] == "Order" and props["order"]["required"] == ["placed", "to"]
    assert props["order"]["properties"]["to"] == {"$ref": "#/$defs/Address"}
    assert props["tree"] == {"$ref": "#/$defs/Category"}
    assert props["window"] == {"type": "string", "format": "duration"}  # a TypeAdapter type
    defs: Any = params["$defs"]
    assert isinstance(defs, dict) and set(defs) == {"Address", "Category"}
    assert defs["Address"]["properties"]["street"]["minLength"] == 3
    assert defs["Address"]["additionalProperties"] is False  # closed, as every object of a tool
    assert defs["Category"]["properties"]["subcategories"]["items"] == {"$ref": "#/$defs/Category"}
    assert spec.output_schema is not None and spec.output_schema["title"] == "Order"
    assert spec.output_schema["$defs"] == defs
    assert spec.strict is False  # minLength


async def test_pydantic_values_are_validated_and_returned_as_json() -> None:
    spec = ta.tool(ship)
    order = {"placed": "2024-05-06", "to": {"street": "Main", "number": 3}}
    tree = {"title": "t", "subcategories": [{"title": "u", "subcategories": []}]}
    assert await _call(spec, {"order": order, "tree": tree, "window": "PT1H"}) == order
    message = await _errors(spec, {
        "order": {"placed": "soon", "to": {"street": "Ma", "number": 0, "floor": 2}},
        "tree": {"title": "t", "subcategories": [{"title": 1, "subcategories": [], "extra": True}]},
        "window": "an hour",
    })
    for part in ("order.to.floor: unexpected field (the fields are: street, number)",
                 'order.placed: Input should be a valid date', "order.to.street: String should have at least 3",
                 "order.to.number: Input should be greater than or equal to 1, got 0",
                 "tree.subcategories[0].extra: unexpected field",
                 "tree.subcategories[0].title: Input should be a valid string, got 1", "window: Input should be"):
        assert part in message
    assert "order.to: required field is missing" in await _errors(
        spec, {"order": {"placed": "2024-05-06"}, "tree": tree, "window": "PT1H"})


ItemA: Any = pydantic.create_model("Item", a=(int, ...))  # two models named Item
ItemB: Any = pydantic.create_model("Item", b=(int, ...))


class FirstHolder(pydantic.BaseModel):
    item: ItemA


class SecondHolder(pydantic.BaseModel):
    item: ItemB


async def both(x: FirstHolder, y: SecondHolder) -> None:
    """Both."""


def test_models_with_one_name_get_distinct_defs() -> None:
    spec = ta.tool(both)
    params = spec.parameters
    assert params is not None
    defs: Any = params["$defs"]
    assert set(defs) == {"Item", "Item2"}
    assert defs["Item"]["required"] == ["a"] and defs["Item2"]["required"] == ["b"]
    props = _props(spec)
    assert props["x"]["properties"]["item"] == {"$ref": "#/$defs/Item"}
    assert props["y"]["properties"]["item"] == {"$ref": "#/$defs/Item2"}


class Point(pydantic.BaseModel):
    x: int
    y: Annotated[int, pydantic.Field(ge=0)]


async def move(to: Point) -> None:
    """Move."""


def test_a_pydantic_only_model_may_be_strict() -> None:
    spec = ta.tool(move)
    assert spec.strict is True and spec.parameters is not None and strict_compatible(spec.parameters)


@pytest.mark.parametrize(
    ("schema", "strict"),
    [
        ({"type": "object", "properties": {}, "required": [], "additionalProperties": False}, True),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}, "required": ["a"],
          "additionalProperties": False}, True),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "path"}}, "required": ["a"],
          "additionalProperties": False}, False),
        ({"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": False}, False),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": [], "additionalProperties": False},
         False),
        ({"type": "object", "properties": {}, "required": []}, False),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"],
          "additionalProperties": False, "$defs": {"A": {"type": "object", "properties": {}}}}, False),
        ({"type": "array", "items": {"type": "string"}}, False),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A", "description": "An A."}}, "required": ["a"],
          "additionalProperties": False, "$defs": {"A": {"type": "string"}}}, False),  # a $ref must stand alone
    ],
)
def test_the_strict_subset(schema: dict[str, Any], strict: bool) -> None:
    assert strict_compatible(schema) is strict


def test_pydantic_is_imported_only_by_a_tool_that_needs_it() -> None:
    code = (
        "import sys, datetime, typing, trio_agent as ta\n"
        "async def f(x: int, when: datetime.datetime, pair: tuple[int, str]) -> int:\n    'F.'\n    return x\n"
        "ta.Tools.default().add(f)\n"
        "assert 'pydantic' not in sys.modules and 'annotated_types' not in sys.modules, 'eager'\n"
        "async def g(x: set[int]) -> None:\n    'G.'\n"
        "ta.tool(g)\n"
        "assert 'pydantic' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_without_pydantic_a_type_only_it_could_describe_is_a_clear_error() -> None:
    code = (  # pydantic looks uninstalled: the lookup trio_agent makes finds nothing
        "import importlib.util, sys, trio_agent as ta\n"
        "importlib.util.find_spec = lambda name, *a: None\n"
        "async def g(x: set[int]) -> None:\n    'G.'\n"
        "try:\n    ta.tool(g)\nexcept ta.ConfigError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pydantic, which could describe it, is not installed" in done.stdout


class Form(pydantic.BaseModel):
    properties: dict[str, str]  # a field named like the schema keyword
    required: list[Category]


async def fill(form: Form) -> None:
    """Fill a form."""


def test_a_field_named_like_a_schema_keyword_is_a_field() -> None:
    form: Any = _props(ta.tool(fill))["form"]
    assert set(form["properties"]) == {"properties", "required"}  # no additionalProperties "field" added
    assert form["properties"]["properties"]["additionalProperties"] == {"type": "string"}  # an open dict stays open
    assert form["additionalProperties"] is False


async def test_an_omitted_argument_with_a_field_default_gets_the_default_not_the_field() -> None:
    async def page(size: int = pydantic.Field(20, le=100), tags: list[str] = pydantic.Field(default_factory=list),
                   ) -> dict[str, Any]:
        """Page."""
        tags.append("seen")  # a fresh list each call
        return {"size": size, "tags": tags}

    spec = ta.tool(page)
    assert _props(spec)["size"] == {"type": "integer", "maximum": 100, "default": 20}
    assert await _call(spec, {}) == {"size": 20, "tags": ["seen"]}
    assert await _call(spec, {}) == {"size": 20, "tags": ["seen"]}
    assert await _call(spec, {"size": 5}) == {"size": 5, "tags": ["seen"]}


async def describe_tree(root: Folder, order: Order) -> None:
    """Describe.

    Args:
        root: The top folder.
        order: The order.
    """


async def describe_folder(root: Folder) -> None:
    """Describe.

    Args:
        root: The top folder.
    """


def test_a_described_ref_stands_alone_in_an_any_of_and_stays_strict() -> None:
    spec = ta.tool(describe_folder)
    assert _props(spec)["root"] == {"anyOf": [{"$ref": "#/$defs/Folder"}], "description": "The top folder."}
    assert spec.strict is True  # with the $ref beside its description, strict mode would refuse the tool
    order: Any = _props(ta.tool(describe_tree))["order"]
    assert order["description"] == "The order." and "$ref" not in order  # an inline model: nothing to move
    assert order["properties"]["to"] == {"$ref": "#/$defs/Address"}
