"""What the options of ``trio-agent run`` build (in process: the parser and
``run_settings``, no command started)."""

from __future__ import annotations

from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent.cli._main import _parsers
from trio_agent.cli._run_options import McpEntry, RunSettings, run_settings

from ._cli import NO_CODEX_HOME

KEY = {"OPENAI_API_KEY": "sk-dummy"}


def settings(*args: str, environ: dict[str, str] | None = None) -> RunSettings:
    parser, run, _serve = _parsers()
    return run_settings(run, parser.parse_args(["run", *args, "hi"]), KEY if environ is None else environ)


def test_the_defaults_leave_everything_to_the_library() -> None:
    got = settings()
    assert (got.local_reason, got.responses, got.instructions, got.sandbox, got.approval) == (
        None, {}, None, None, ta.ApprovalPolicy.NEVER
    )
    assert got.tools.definitions() == ta.Tools.default().definitions()


def test_without_a_key_the_local_model_answers_and_local_ignores_the_environment() -> None:
    got = settings("--max-attempts", "2", environ={"NANOCODEX_RESPONSES_TRANSPORT": "https",
                                                   "CODEX_HOME": NO_CODEX_HOME})
    assert got.local_reason == f"no OPENAI_API_KEY set and no Codex login at {NO_CODEX_HOME}/auth.json"
    assert got.responses == {"max_attempts": 2}
    local = settings("--local", environ={"OPENAI_BASE_URL": "https://proxy.example/v1", "CODEX_HOME": NO_CODEX_HOME})
    assert (local.local_reason, local.responses) == ("--local given", {})
    # Without --local, OPENAI_BASE_URL without a credential is refused (tests/cli/test_advice.py).


def test_flags_win_over_the_environment() -> None:
    environ = {**KEY, "OPENAI_BASE_URL": "https://env.example/v1", "OPENAI_API_BASE_URL": "https://other.example",
               "NANOCODEX_RESPONSES_TRANSPORT": "https", "OPENAI_RESPONSES_WEBSOCKET_URL": "wss://env.example/ws"}
    assert settings(environ=environ).responses == {
        "api_base_url": "https://env.example/v1", "websocket_url": "wss://env.example/ws",
        "transport": ta.Transport.HTTPS,
    }
    assert settings("--api-base", "https://flag.example/v1/", "--transport", "websocket",
                    "--websocket-url", "ws://127.0.0.1:9/x", environ=environ).responses == {
        "api_base_url": "https://flag.example/v1", "websocket_url": "ws://127.0.0.1:9/x",
        "transport": ta.Transport.WEBSOCKET,
    }
    only_nanocodex = {**KEY, "OPENAI_API_BASE_URL": "https://nano.example/v1"}
    assert settings(environ=only_nanocodex).responses == {"api_base_url": "https://nano.example/v1"}


def test_the_websocket_url_is_derived_from_the_api_base_by_the_config() -> None:
    responses = ta.Responses(profile=ta.Profile.OPENAI, **settings("--api-base", "https://proxy.example/v1").responses)
    assert ta.AgentConfig(auth="sk-dummy", responses=responses).websocket_url == "wss://proxy.example/v1/responses"


def test_mcp_options_are_kept_in_order_with_their_args() -> None:
    parser, _run, _serve = _parsers()
    args = parser.parse_args(["run", "--mcp-stdio", "git=uvx 'mcp server git'", "--mcp", "docs=https://d.example/mcp",
                              "--mcp-arg=--repo=.", "--mcp-stdio", "fs=fs-server", "hi"])
    assert args.mcp == [McpEntry("stdio", "git", "uvx", ("mcp server git", "--repo=.")),
                        McpEntry("http", "docs", "https://d.example/mcp"), McpEntry("stdio", "fs", "fs-server")]
    tools = settings("--mcp", "docs=https://d.example/mcp", "--mcp-stdio", "git=uvx mcp-server-git").tools
    assert tools.mcp_servers == {"docs": ta.McpServer.http("https://d.example/mcp"),
                                 "git": ta.McpServer.stdio("uvx", ["mcp-server-git"])}


def test_tool_switches() -> None:
    names = [d.get("name") for d in settings("--image-generation").tools.definitions()]
    plain = [d.get("name") for d in ta.Tools.default().definitions()]
    assert names == plain  # nested tools live in exec's description, not as definitions
    assert "image_gen__imagegen" in str(settings("--image-generation").tools.definitions())
    assert "is turned off" in str(settings("--no-web-search").tools.definitions())


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], None),
        (["--sandbox", "read-only"], ta.Sandbox(ta.SandboxMode.READ_ONLY)),
        (["--sandbox", "danger-full-access"], ta.Sandbox(ta.SandboxMode.DANGER_FULL_ACCESS)),
        (["--network"], ta.Sandbox(ta.SandboxMode.WORKSPACE_WRITE, network=True)),
        (["--sandbox", "read-only", "--network"], ta.Sandbox(ta.SandboxMode.READ_ONLY, network=True)),
        (["--writable-git", "--writable-root", "/"], ta.Sandbox(writable_git=True, writable_roots=[Path("/")])),
    ],
)
def test_sandbox_options(args: list[str], expected: ta.Sandbox | None) -> None:
    assert settings(*args).sandbox == expected


def test_instructions_are_text_or_a_file(tmp_path: Path) -> None:
    assert settings("--instructions", "Be brief.").instructions == "Be brief."
    (tmp_path / "rules.md").write_text("From a file.\n")
    assert settings("--instructions", f"@{tmp_path / 'rules.md'}").instructions == "From a file.\n"
