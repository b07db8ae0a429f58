"""A user's own test written with ``trio_agent.testing``; type-checked, never run.

``tests/typing/test_testing_kit_typing.py`` runs ``mypy --strict --disallow-any-expr``
on it: what the kit hands back -- a request the agent sent (WebSocket or HTTPS), the
server's and the connection's request lists, an event log's payloads -- is JSON data
(``ta.JsonValue``), so no ``Any`` reaches the user's assertions.
"""

from __future__ import annotations

from typing import assert_type

import trio_agent as ta
from trio_agent.testing import EventLog, FakeResponsesServer


async def script(server: FakeResponsesServer) -> None:
    conn = await server.accept()
    request = await conn.next_request()
    assert_type(request, dict[str, ta.JsonValue])
    assert request.get("type") == "response.create"
    model = request.get("model")
    assert isinstance(model, str) and model.startswith("gpt")
    assert_type(conn.requests, list[dict[str, ta.JsonValue]])
    assert_type(server.requests, list[dict[str, ta.JsonValue]])
    await conn.send_completed("resp_1")
    http = await server.accept_http()
    assert_type(http.body, dict[str, ta.JsonValue])
    assert_type(http.body.get("input"), ta.JsonValue)


def check(log: EventLog) -> None:
    payloads = log.payloads("run.completed")
    assert_type(payloads, list[dict[str, ta.JsonValue]])
    status = payloads[-1]["status"]
    assert_type(status, ta.JsonValue)
    assert status == "completed"
