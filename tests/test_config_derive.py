"""``AgentConfig._derive`` (forks and children) gives what ``attrs.evolve`` gives for the
changes the agent makes, without validating again."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

import trio_agent as ta


def test_derive_is_evolve_for_the_agents_changes(tmp_path: Path) -> None:
    config = ta.AgentConfig(auth="test", workspace=tmp_path, prompt_cache_key="lineage",
                            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                   websocket_url="ws://127.0.0.1:9/responses"))
    changes = {"session_id": "01890a5d-ac96-774b-bcce-b302099a8057", "prompt_cache_key": config.cache_key,
               "thinking": ta.Thinking.HIGH, "fast_mode": True, "workspace": config.resolved_workspace(),
               "resume": None}
    derived = config._derive(**changes)
    evolved = attrs.evolve(config, **changes)
    assert derived == evolved
    for field in attrs.fields(ta.AgentConfig):
        assert getattr(derived, field.name) == getattr(evolved, field.name), field.name
    assert derived.responses.history is evolved.responses.history  # the auth's store is kept
    assert config.session_id != derived.session_id  # the original is unchanged


def test_derive_refuses_what_is_not_a_field(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="not AgentConfig fields"):
        ta.AgentConfig(auth="test", workspace=tmp_path)._derive(sessionid="x")


def test_uuid7_text_is_a_version_7_uuid_in_canonical_form() -> None:
    import uuid

    from trio_agent._ids import new_item_id, uuid7_text

    texts = [uuid7_text() for _ in range(200)]
    for text in texts:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert len(set(texts)) == len(texts)
    item_id = new_item_id("message")
    assert item_id is not None and item_id.startswith("msg_") and uuid.UUID(item_id[4:]).version == 7
