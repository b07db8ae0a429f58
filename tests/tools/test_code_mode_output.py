"""Pure tests: output formatting, truncation and the `exec` pragma."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._tools.code_mode._output import (
    format_cell_output,
    format_failure,
    format_header,
    status_running,
    truncate_content,
    truncate_middle,
)
from trio_agent._tools.code_mode._pragma import (
    ExecSource,
    ExecSourceError,
    parse_exec_source,
)


def _text(value: str) -> dict[str, object]:
    return {"type": "input_text", "text": value}


IMAGE: dict[str, object] = {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"}


def test_header_format() -> None:
    assert format_header("Script completed", 1.25) == (
        "Script completed\nWall time 1.2 seconds\nOutput:\n"
    )
    assert status_running(7) == "Script running with cell ID 7"
    assert format_header(status_running(7), 11.0) == (
        "Script running with cell ID 7\nWall time 11.0 seconds\nOutput:\n"
    )


def test_output_without_content_is_a_plain_string() -> None:
    assert format_cell_output("Script completed", 0.0, []) == (
        "Script completed\nWall time 0.0 seconds\nOutput:\n"
    )


def test_output_with_content_is_an_array_starting_with_the_header() -> None:
    assert format_cell_output("Script terminated", 2.0, [_text("a"), IMAGE]) == [
        _text("Script terminated\nWall time 2.0 seconds\nOutput:\n"),
        _text("a"),
        IMAGE,
    ]


def test_failure_is_a_plain_string() -> None:
    assert format_failure("boom", 0.04) == "Script failed\nWall time 0.0 seconds\nOutput:\nboom"


def test_text_only_truncation_merges_into_one_item() -> None:
    # nanocodex output.rs `merges_and_formats_text_only_truncation`
    assert truncate_content([_text("abcdefgh"), _text("ijklmnop")], 2) == [
        _text(
            "Warning: truncated output (original token count: 5)\nTotal output lines: 2\n\n"
            "abcd…3 tokens truncated…mnop"
        )
    ]


def test_text_within_budget_is_untouched() -> None:
    items = [_text("abcd"), _text("efgh")]
    assert truncate_content(items, 3) == items
    assert truncate_content(items) == items


def test_mixed_truncation_keeps_images_and_counts_omitted_text() -> None:
    # nanocodex output.rs `truncates_text_and_preserves_images`
    content = [_text("abcdefgh"), IMAGE, _text("ijklmnop")]
    assert truncate_content(content, 2) == [
        _text("abcdefgh"),
        IMAGE,
        _text("[omitted 1 text items ...]"),
    ]


def test_mixed_truncation_middle_truncates_the_item_that_crosses_the_budget() -> None:
    content = [IMAGE, _text("x" * 40), _text("tail")]
    assert truncate_content(content, 4) == [
        IMAGE,
        _text("xxxxxxxx…6 tokens truncated…xxxxxxxx"),
        _text("[omitted 1 text items ...]"),
    ]


def test_default_budget_is_ten_thousand_tokens() -> None:
    fits = [_text("y" * 40_000)]
    assert truncate_content(fits) == fits
    (item,) = truncate_content([_text("y" * 40_001)])
    assert str(item["text"]).startswith(
        "Warning: truncated output (original token count: 10001)\nTotal output lines: 1\n\n"
    )


def test_truncate_middle_respects_utf8_boundaries() -> None:
    assert truncate_middle("ééééé", 1) == "é…2 tokens truncated…é"
    assert truncate_middle("abc", 0) == "…1 tokens truncated…"
    assert truncate_middle("", 0) == ""


@given(st.text().filter(lambda t: "…" not in t), st.integers(min_value=1, max_value=50))
def test_truncate_middle_keeps_a_head_and_a_tail_within_budget(text: str, tokens: int) -> None:
    # (texts containing the marker's own "…" are excluded: the split below relies on it)
    result = truncate_middle(text, tokens)
    if len(text.encode()) <= tokens * 4:
        assert result == text
        return
    head, _, rest = result.partition("…")
    marker, _, tail = rest.partition("…")
    assert marker.endswith(" tokens truncated")
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head.encode()) + len(tail.encode()) <= tokens * 4 + 3


def test_pragma_is_parsed_and_replaced_by_an_empty_line() -> None:
    parsed = parse_exec_source(
        '// @exec: {"yield_time_ms": 500, "max_output_tokens": 20}\ntext(1)\ntext(2)'
    )
    assert parsed == ExecSource(code="\ntext(1)\ntext(2)", yield_time_ms=500, max_output_tokens=20)
    assert parse_exec_source('  // @exec: {"yield_time_ms": null}\nx') == ExecSource(code="\nx")
    assert parse_exec_source("text(1)") == ExecSource(code="text(1)")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("  \n ", "exec expects raw JavaScript source text (non-empty)."),
        ('// @exec: {"yield_time_ms": 5}', "exec pragma must be followed by JavaScript source"),
        ('// @exec: {"yield_time_ms": 5}\n  \n', "exec pragma must be followed by JavaScript"),
        ("// @exec:\ntext(1)", "exec pragma must be a JSON object with supported fields"),
        ("// @exec: {nope\ntext(1)", "exec pragma must be valid JSON with supported fields"),
        ("// @exec: [1]\ntext(1)", "exec pragma must be a JSON object"),
        (
            '// @exec: {"timeout": 1}\ntext(1)',
            "exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `timeout`",
        ),
        (
            '// @exec: {"yield_time_ms": -1}\ntext(1)',
            "exec pragma field `yield_time_ms` must be a non-negative safe integer",
        ),
        (
            '// @exec: {"max_output_tokens": 1.5}\ntext(1)',
            "exec pragma field `max_output_tokens` must be a non-negative safe integer",
        ),
        (
            '// @exec: {"yield_time_ms": true}\ntext(1)',
            "exec pragma field `yield_time_ms` must be a non-negative safe integer",
        ),
        (
            '// @exec: {"yield_time_ms": 9007199254740992}\ntext(1)',
            "exec pragma field `yield_time_ms` must be a non-negative safe integer",
        ),
    ],
)
def test_invalid_pragmas(source: str, message: str) -> None:
    with pytest.raises(ExecSourceError) as info:
        parse_exec_source(source)
    assert str(info.value).startswith(message)
