"""RequestText: a body's JSON with its repeated part encoded once is exactly ``dumps(body)``."""

from __future__ import annotations

from typing import Any

from trio_agent._jsontext import EncodedList, dumps
from trio_agent._runtime._model._request_text import RequestText
from trio_agent._session.history import History
from trio_agent._wire.request import RequestSettings, build_response_create

SETTINGS = RequestSettings(model="gpt-5.5", effort="medium", fast_mode=False, store=True,
                           prompt_cache_key="key", session_id="session")
FAST = RequestSettings(model="gpt-5.5", effort="high", fast_mode=True, store=False,
                       prompt_cache_key="k\ud800", session_id="s\u00e9")
PROMPT = {"type": "message", "id": "msg_1", "role": "user",
          "content": [{"type": "input_text", "text": "h\u00e9 \ud83d"}]}


def bodies() -> list[tuple[dict[str, Any], Any]]:
    history = History([PROMPT, {"type": "message", "role": "assistant", "id": "plain", "content": []}])
    full = build_response_create(SETTINGS, history.replay([{"type": "additional_tools", "id": "x", "tools": []}]))
    assert type(full["input"]) is EncodedList
    compaction = build_response_create(SETTINGS, history.replay(()), websocket=False)
    compaction["input"].append({"type": "compaction_trigger"})
    return [
        (build_response_create(SETTINGS, [PROMPT], previous_response_id="resp-1"), 1),
        (build_response_create(SETTINGS, [PROMPT], previous_response_id="resp-2"), 1),
        (build_response_create(SETTINGS, [PROMPT]), 1),
        (full, 1),
        (build_response_create(SETTINGS, [], generate=False, turn_state="ts"), 2),
        (build_response_create(FAST, [PROMPT], previous_response_id="r", websocket=False), 3),
        (build_response_create(FAST, [PROMPT], websocket=True, turn_state="t\ud800"), 4),
        (compaction, 5),
    ]


def test_the_text_is_dumps_of_the_body_whatever_comes_before() -> None:
    cases = bodies()
    for order in (cases, cases[::-1]):
        text = RequestText()
        for body, key in order:
            assert text.text(body, key) == dumps(body)
            assert text.text(body, key) == dumps(body)  # the template reused


def test_an_unexpected_layout_is_encoded_in_full() -> None:
    text = RequestText()
    for body in ({"input": [1]}, {"a": 1, "input": "not a list", "b": 2}, {"a": 1, "input": [], "b": {1: 2}},
                 {"a": 1, "previous_response_id": "p", "x": 0, "input": [PROMPT], "b": 2}):
        assert text.text(body, repr(body)) == dumps(body)
