"""docs/app-server.md "Every method of the schema" says, for each method of the codex
schema's ``ClientRequest``, what this server answers: the table must list every method
once, and list as refused exactly those the router does not have (issue 22 item 6)."""

from __future__ import annotations

import re
from pathlib import Path

import trio_agent as ta
from trio_agent._serve._router import METHODS

from ._schema import document

DOC = Path(ta.__file__).resolve().parent.parent / "docs" / "app-server.md"


def _table() -> dict[str, str]:
    text = DOC.read_text()
    section = text[text.index("## Every method of the schema"):]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| `([^`]+)` \| (implemented|empty|refused) \|$", section, flags=re.MULTILINE)
    table = dict(rows)
    assert len(table) == len(rows), "a method is listed twice"
    return table


def test_the_table_lists_every_method_of_the_schema_as_the_router_answers_it() -> None:
    schema = [entry["properties"]["method"]["enum"][0] for entry in document()["definitions"]["ClientRequest"]["oneOf"]]
    table = _table()
    assert list(table) == schema  # each method once, in the schema's order
    refused = {method for method, status in table.items() if status == "refused"}
    assert refused == set(schema) - set(METHODS)
    beyond = set(METHODS) - set(schema)
    assert beyond == {"collaborationMode/list", "thread/rollback"}  # described below the table
    text = DOC.read_text()
    assert all(f"`{method}`" in text[text.index("Beyond the schema"):] for method in beyond)
