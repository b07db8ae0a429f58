"""``shown_body``: what a rejection's error message shows of its body (issue 25, item 4)."""

from __future__ import annotations

from trio_agent._transport._rejection import SHOWN_BODY_CHARS, shown_body


def test_the_error_message_of_a_json_error_document_is_shown() -> None:
    assert shown_body('{"error": {"message": "bad tool", "code": "x"}}') == "bad tool"


def test_any_other_body_is_shown_up_to_the_bound() -> None:
    long = "a" * 10_000
    assert shown_body(long) == "a" * SHOWN_BODY_CHARS
    assert shown_body('{"error": {"message": "  "}}') == '{"error": {"message": "  "}}'  # a blank message
    assert shown_body('{"error": "flat"}') == '{"error": "flat"}'
    assert shown_body("[1, 2]") == "[1, 2]"  # JSON that is not an object
    assert shown_body("[" * 100_000) == "[" * SHOWN_BODY_CHARS  # too deep to parse: the text
    assert shown_body("") == ""
