"""The schema check itself: the real transcript passes, wrong shapes fail."""

from __future__ import annotations

import json

import pytest

from ._schema import FIXTURES, check, response_pointer, validate_server_message


def transcript() -> list[dict[str, object]]:
    return [json.loads(line) for line in (FIXTURES / "transcript-one-turn.jsonl").read_text().splitlines()]


def test_every_server_message_of_the_real_transcript_validates() -> None:
    methods: dict[object, str] = {}
    checked = 0
    for line in transcript():
        message = line["msg"]
        assert isinstance(message, dict)
        if line["dir"] == "client->server":
            if "id" in message:
                methods[message["id"]] = str(message["method"])
            continue
        validate_server_message(message, methods.get(message.get("id")) if "method" not in message else None)
        checked += 1
    assert checked == 22


def test_response_types_follow_the_params_names() -> None:
    assert response_pointer("thread/start") == "#/definitions/v2/ThreadStartResponse"
    assert response_pointer("initialize") == "#/definitions/InitializeResponse"
    assert response_pointer("thread/loaded/list") == "#/definitions/v2/ThreadLoadedListResponse"


@pytest.mark.parametrize("wrong", [
    {"method": "thread/closed", "params": {}},  # threadId missing
    {"method": "thread/status/changed", "params": {"threadId": "t", "status": {"type": "busy"}}},
    {"method": "turn/started", "params": {"threadId": "t", "turn": {"id": 1, "items": [], "status": "inProgress"}}},
])
def test_a_wrong_notification_is_caught(wrong: dict[str, object]) -> None:
    with pytest.raises(AssertionError):
        validate_server_message(wrong, None)


def test_a_wrong_result_is_caught() -> None:
    with pytest.raises(AssertionError, match="ThreadUnsubscribeResponse"):
        validate_server_message({"id": 1, "result": {"status": "gone"}}, "thread/unsubscribe")
    check("#/definitions/v2/ThreadUnsubscribeResponse", {"status": "notLoaded"}, "ok")
