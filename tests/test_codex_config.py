"""Codex ``-c key=value`` overrides (``trio_agent._codex_config``): parsing as codex does,
the keys trio-agent maps, the rest reported, bad values refused in one line."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from trio_agent import ApprovalPolicy, SandboxMode, Thinking
from trio_agent._codex_config import CodexConfigError, CodexSettings, Provider, WebSearch, parse_overrides, toml_value


def test_nothing_given_says_nothing() -> None:
    settings = parse_overrides([])
    assert settings == CodexSettings()
    assert settings.ignored_message() is None and settings.base_url is None and settings.web_search_enabled is None


@pytest.mark.parametrize(("text", "value"), [
    ('"gpt-5.5"', "gpt-5.5"), ("gpt-5.5", "gpt-5.5"),  # not TOML: the raw string, as codex
    ("false", False), ("42", 42), ('["/a", "/b"]', ["/a", "/b"]), ("{a = 1}", {"a": 1}),
    ("", ""), ("on-request", "on-request"), ("'single'", "single"),
])
def test_values_are_toml_else_the_raw_string(text: str, value: object) -> None:
    assert toml_value(text) == value


def test_the_keys_the_sdks_send_are_mapped() -> None:
    settings = parse_overrides([
        'model="gpt-5.4"', "model_reasoning_effort=high", 'sandbox_mode="workspace-write"',
        'approval_policy="on-request"', "sandbox_workspace_write.network_access=true",
        'sandbox_workspace_write.writable_roots=["/srv/data", "rel"]', 'web_search="live"',
        'openai_base_url="http://127.0.0.1:9/v1"', 'instructions="be brief"', "developer_instructions=use tabs",
        'model_verbosity="medium"', "show_raw_agent_reasoning=true",
    ])
    assert settings == CodexSettings(
        model="gpt-5.4", reasoning_effort=Thinking.HIGH, sandbox_mode=SandboxMode.WORKSPACE_WRITE,
        approval_policy=ApprovalPolicy.ON_REQUEST, network_access=True, writable_roots=(Path("/srv/data"), Path("rel")),
        web_search=WebSearch.LIVE, openai_base_url="http://127.0.0.1:9/v1", instructions="be brief",
        developer_instructions="use tabs", model_verbosity="medium", show_raw_agent_reasoning=True,
    )
    assert settings.base_url == "http://127.0.0.1:9/v1" and settings.web_search_enabled is True
    assert settings.ignored_message() is None


def test_keys_and_values_are_trimmed_and_split_on_the_first_equals() -> None:
    assert parse_overrides([' model = "m" ', "instructions=a=b"]) == CodexSettings(model="m", instructions="a=b")


def test_a_later_override_wins_and_an_inline_table_replaces_the_table() -> None:
    assert parse_overrides(["model=a", "model=b"]).model == "b"
    dotted = parse_overrides(["sandbox_workspace_write.network_access=true",
                              "sandbox_workspace_write={writable_roots=['/x']}"])
    assert dotted.network_access is None and dotted.writable_roots == (Path("/x"),)
    inline = parse_overrides(["sandbox_workspace_write={network_access=false}"])
    assert inline.network_access is False


def test_a_provider_supplies_the_base_url_and_key_variable() -> None:
    settings = parse_overrides([
        'model_provider="local"', 'model_providers.local.base_url="http://127.0.0.1:1/v1"',
        'model_providers.local.env_key="LOCAL_KEY"', 'model_providers.local.wire_api="responses"',
        'model_providers.local.name="Local"', 'openai_base_url="https://other.example/v1"',
    ])
    assert settings.providers == {"local": Provider("local", "http://127.0.0.1:1/v1", "LOCAL_KEY")}
    assert settings.base_url == "http://127.0.0.1:1/v1" and settings.api_key_env == "LOCAL_KEY"
    assert settings.ignored == ("model_providers.local.name",)
    builtin = parse_overrides(["model_provider=openai", 'openai_base_url="https://h.example/v1"'])
    assert builtin.base_url == "https://h.example/v1" and builtin.api_key_env is None
    unused = parse_overrides(['model_providers.x.base_url="http://127.0.0.1:2/v1"'])
    assert unused.provider is None and unused.base_url is None


def test_the_rest_is_reported_once_sorted() -> None:
    settings = parse_overrides(["zeta=1", "features.foo=true", "analytics.enabled=false", "tools.view_image=true",
                                "sandbox_workspace_write.exclude_slash_tmp=true", "shell_environment_policy={}",
                                'tools.web_search=false'])
    assert settings.ignored == ("analytics.enabled", "features.foo", "sandbox_workspace_write.exclude_slash_tmp",
                                "shell_environment_policy", "tools.view_image", "zeta")
    assert settings.ignored_message() == (
        "trio-agent: ignoring codex config keys it does not implement: analytics.enabled, features.foo, "
        "sandbox_workspace_write.exclude_slash_tmp, shell_environment_policy, tools.view_image, zeta")
    assert settings.web_search is WebSearch.DISABLED


def test_web_search_cached_does_not_search_live() -> None:
    assert parse_overrides(["web_search=cached"]).web_search_enabled is False
    assert parse_overrides(["web_search=disabled"]).web_search_enabled is False
    assert parse_overrides(["tools.web_search=true"]).web_search is WebSearch.LIVE
    assert parse_overrides(["web_search=disabled", "tools.web_search=true"]).web_search is WebSearch.DISABLED


@pytest.mark.parametrize(("override", "says"), [
    ("model", "expected key=value"),
    ("=x", "dotted name"),
    ("a..b=1", "dotted name"),
    ("model=1", "-c model: must be a non-empty string, got 1"),
    ('model=""', "-c model: must be a non-empty string"),
    ("model.x=1", "-c model: must be a non-empty string, got {'x': 1}"),
    ("model_reasoning_effort=max", "one of none, minimal, low, medium, high, xhigh"),
    ("sandbox_mode=yolo", "-c sandbox_mode: must be one of read-only, workspace-write, danger-full-access"),
    ("approval_policy=sometimes", "-c approval_policy: must be one of never, on-request, on-failure, untrusted"),
    ("approval_policy={granular={sandbox_approval=true}}", "granular policies are not implemented"),
    ("sandbox_workspace_write.network_access=yes", "-c sandbox_workspace_write.network_access: must be true or false"),
    ("sandbox_workspace_write.writable_roots=/tmp", "must be an array of directory paths"),
    ("sandbox_workspace_write.writable_roots=[1]", "must be an array of directory paths"),
    ("sandbox_workspace_write=true", "-c sandbox_workspace_write: must be a table"),
    ("openai_base_url=127.0.0.1:1", "-c openai_base_url: must be an http:// or https:// URL"),
    ("model_providers.local.base_url=ftp://h/v1", "-c model_providers.local.base_url: must be an http://"),
    ('model_providers.local.wire_api="chat"', "Responses API only"),
    ("model_providers.local=1", "-c model_providers.local: must be a table"),
    ("model_provider=nowhere", "'nowhere' is neither 'openai' nor defined"),
    ("web_search=sometimes", "-c web_search: must be one of disabled, cached, live"),
    ("tools.web_search=live", "-c tools.web_search: must be true or false"),
    ("model_verbosity=loud", "-c model_verbosity: must be one of low, medium, high"),
    ("show_raw_agent_reasoning=1", "-c show_raw_agent_reasoning: must be true or false"),
    ("instructions=[1]", "-c instructions: must be a non-empty string"),
])
def test_a_bad_value_for_a_known_key_is_one_line(override: str, says: str) -> None:
    with pytest.raises(CodexConfigError) as caught:
        parse_overrides(["model=fine", override])
    message = str(caught.value)
    assert says in message and "\n" not in message, message


def test_a_long_bad_value_is_shortened() -> None:
    with pytest.raises(CodexConfigError) as caught:
        parse_overrides([f"sandbox_mode={'x' * 500}"])
    assert len(str(caught.value)) < 200


def test_settings_are_frozen() -> None:
    settings = parse_overrides(['model_providers.p.base_url="http://127.0.0.1:1/v1"', "model_provider=p"])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        settings.model = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.providers["q"] = Provider("q")  # type: ignore[index]
