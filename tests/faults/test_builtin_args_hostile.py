"""Hostile arguments to the built-in shell tools: whatever JSON the model sends to
``exec_command`` and ``write_stdin`` (unknown keys, wrong types, a ``tty``/``size`` of
any shape), parsing gives a request or a ``ShellError`` that names the problem -- a
failed tool result -- never another exception."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent._tools._shell_env import EXEC_ARGUMENTS, WRITE_ARGUMENTS, parse_exec_args, parse_write_args
from trio_agent._tools.exec_command import ShellError

from ._mutations import JSON_VALUES

KEYS = st.sampled_from([*EXEC_ARGUMENTS, *WRITE_ARGUMENTS, "timeout", "rows", "cols", "", "TTY", "__proto__"])
SIZES = st.fixed_dictionaries({}, optional={"rows": JSON_VALUES | st.integers(), "cols": JSON_VALUES | st.integers()})
ARGUMENTS = st.dictionaries(KEYS, JSON_VALUES | st.integers() | st.booleans() | SIZES, max_size=6)


@settings(max_examples=400, deadline=None)
@given(ARGUMENTS, st.booleans())
def test_any_shell_tool_arguments_parse_or_fail_with_a_shell_error(args: dict[str, Any], exec_tool: bool) -> None:
    known = EXEC_ARGUMENTS if exec_tool else WRITE_ARGUMENTS
    try:
        if exec_tool:
            parse_exec_args(args, Path("/workspace"))
        else:
            parse_write_args(args)
    except ShellError as exc:
        unknown = sorted(key for key in args if key not in known)
        if unknown:  # refused by name, before anything else is looked at
            assert all(repr(key) in str(exc) for key in unknown)
        return
    assert set(args) <= set(known)


# -- hostile images ------------------------------------------------------------------------------

_PNG_START = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=200).map(lambda tail: _PNG_START + tail) | st.binary(max_size=200),
    st.sampled_from([None, "high", "low", "auto", "original", "HIGH", "huge", 3]),
    st.sampled_from(["data:image/png;base64,", "data:image/png,", "data:;base64,", "file:", ""]),
)
def test_any_image_a_cell_shows_becomes_an_image_or_a_note(data: bytes, detail: object, prefix: str) -> None:
    import base64

    from trio_agent._tools._image_prepare import prepare_output_item

    item: dict[str, object] = {"type": "input_image", "image_url": prefix + base64.b64encode(data).decode()}
    if detail is not None:
        item["detail"] = detail
    prepared = prepare_output_item(item)
    assert "detail" not in prepared
    assert prepared["type"] in ("input_image", "input_text")
