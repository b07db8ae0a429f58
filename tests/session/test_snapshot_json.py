"""``SessionSnapshot.to_json()`` / ``to_json_text()``, built without the converter, are
what the converter made: the same data, keys in the same order, and fresh containers
(a change to the returned JSON changes no history)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trio_agent import SessionSnapshot
from trio_agent._json import converter
from trio_agent._jsontext import dumps

GOLDEN = Path(__file__).parent.parent / "fixtures" / "session_snapshot_v1.json"


def _converter_json(snapshot: SessionSnapshot) -> dict[str, Any]:
    data: dict[str, Any] = converter.unstructure(snapshot)
    return {"version": data.pop("version"), **data}


def _snapshot() -> SessionSnapshot:
    snapshot = SessionSnapshot.from_json(GOLDEN.read_text())
    extra = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "caf\u00e9 \ud800"}],
              "meta": {"nested": [1, 2.5, None, True, {"deep": "x"}]}}]
    return SessionSnapshot.from_json({**snapshot.to_json(), "history": [*snapshot.history, *extra]})


def test_to_json_is_the_converters_json_in_the_same_order() -> None:
    snapshot = _snapshot()
    expected = _converter_json(snapshot)
    assert snapshot.to_json() == expected
    assert json.dumps(snapshot.to_json()) == json.dumps(expected)  # key order included
    assert snapshot.to_json_text() == dumps(expected)


def test_to_json_returns_fresh_containers() -> None:
    snapshot = _snapshot()
    data = snapshot.to_json()
    data["history"][-1]["meta"]["nested"][4]["deep"] = "changed"
    data["history"].append({"type": "message"})
    data["request_prefix"].clear()
    assert snapshot.to_json() == _converter_json(snapshot)
    assert snapshot.history[-1]["meta"]["nested"][4]["deep"] == "x"
