"""Parameter descriptions from docstrings: Google (``Args:``), reST (``:param x:``) and
NumPy (``Parameters`` + dashes) styles; the summary is the text before the first section."""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_GOOGLE_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Yields?|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?)\s*:\s*$"
)
_GOOGLE_PARAM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_NUMPY_PARAM = re.compile(r"^(\w+)\s*(?::.*)?$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and per-parameter descriptions
    (Google ``Args:``, reST ``:param x:`` or NumPy ``Parameters`` sections)."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if _GOOGLE_SECTION.match(stripped) or stripped.startswith(":") or (stripped and _underlined(lines, i)):
            break
        summary.append(line)
        i += 1
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith(":param"):
            i = _take(lines, i, _REST_PARAM, params, continuation_indent=1)
        elif _GOOGLE_SECTION.match(stripped) and stripped.split(":")[0] in (
            "Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"
        ):
            i = _section(lines, i + 1, params)
        elif stripped in ("Parameters", "Other Parameters") and _underlined(lines, i):
            i = _numpy(lines, i + 2, params)
        else:
            i += 1
    return "\n".join(summary).strip(), params


def _underlined(lines: list[str], i: int) -> bool:
    """A NumPy section header: the next line is all dashes."""
    return i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _take(lines: list[str], i: int, pattern: re.Pattern[str], params: dict[str, str], continuation_indent: int) -> int:
    match = pattern.match(lines[i].strip())
    base = _indent(lines[i])
    i += 1
    if match is None:
        return i
    text = [match.group(2).strip()]
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) >= base + continuation_indent:
        text.append(lines[i].strip())
        i += 1
    params[match.group(1)] = " ".join(t for t in text if t)
    return i


def _section(lines: list[str], i: int, params: dict[str, str]) -> int:
    if i >= len(lines):
        return i
    base = _indent(lines[i]) if lines[i].strip() else 0
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) >= base > 0):
        if lines[i].strip() and _indent(lines[i]) == base:
            i = _take(lines, i, _GOOGLE_PARAM, params, continuation_indent=1)
        else:
            i += 1
    return i


def _numpy(lines: list[str], i: int, params: dict[str, str]) -> int:
    while i < len(lines) and lines[i].strip():
        match = _NUMPY_PARAM.match(lines[i].strip())
        base = _indent(lines[i])
        i += 1
        text = []
        while i < len(lines) and lines[i].strip() and _indent(lines[i]) > base:
            text.append(lines[i].strip())
            i += 1
        if match is not None:
            params[match.group(1)] = " ".join(text)
    return i
