"""The README's testing example is executed from README.md itself, so it stays true."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import trio

README = Path(__file__).parent.parent / "README.md"


def _example() -> dict[str, Any]:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"## Testing an agent deterministically\n\n```python\n(.*?)```", text, re.S)
    assert match is not None, "README.md lost its testing example"
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), str(README), "exec"), namespace)
    return namespace


async def test_the_readme_testing_example_passes(nursery: trio.Nursery, tmp_path: Path) -> None:
    with trio.fail_after(10):
        await _example()["test_the_agent_uses_my_tool"](nursery, tmp_path)
