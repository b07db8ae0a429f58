"""``trio-agent exec``'s command line to what it asks the server (pure: no process, no
Trio): codex's flags, the ``-c`` keys the TypeScript SDK sends (read by
``_codex_config``), which wins when both say something, and the model's environment."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from trio_agent.cli._exec._command import ExecArgs, build_request, codex_settings, exec_parser, model_environ
from trio_agent.cli._exec._session import ExecRequest, sandbox_policy, turn_params


class Terminal(io.StringIO):
    """A stdin that is a terminal (exec does not read it when the prompt is an argument)."""

    def isatty(self) -> bool:
        return True


def request_of(argv: list[str], environ: dict[str, str] | None = None) -> ExecRequest:
    parser = exec_parser()
    exec_args = ExecArgs(parser, parser.parse_intermixed_args(argv))
    settings = codex_settings(parser, exec_args.args.config)
    return build_request(exec_args, settings, Terminal(), environ or {})


def test_the_sdks_every_option_argv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ts-sdk-extra_real-codex.jsonl's second turn, paths made local."""
    image = tmp_path / "img.png"
    image.write_bytes(b"png")
    argv = ["--experimental-json", "--config", "show_raw_agent_reasoning=false", "--config", 'model_verbosity="low"',
            "--model", "gpt-5.5", "--sandbox", "danger-full-access", "--cd", str(tmp_path), "--add-dir", "/tmp",
            "--skip-git-repo-check", "--config", 'model_reasoning_effort="low"', "--config",
            "sandbox_workspace_write.network_access=false", "--config", 'web_search="disabled"', "--config",
            'approval_policy="never"', "resume", "01a2338c-60be-70c3-a825-65534733c332", "--image", str(image),
            "hello"]
    request = request_of(argv)
    assert request == ExecRequest(
        "hello", images=(str(image),), resume="01a2338c-60be-70c3-a825-65534733c332", cwd=str(tmp_path.resolve()),
        cd_given=True, model="gpt-5.5", sandbox="danger-full-access", writable_roots=(str(Path("/tmp").resolve()),),
        network_access=False, approval="never", effort="low", web_search=False, client_name="trio_agent_exec",
        version=request.version)
    assert sandbox_policy(request) is None  # danger-full-access: nothing to add
    assert "web_search" not in capsys.readouterr().err  # applied: the thread has no web__run


@pytest.mark.parametrize(("argv", "fields"), [
    (["-c", 'approval_policy="on-request"', "p"], {"approval": "on-request"}),
    (["-c", 'approval_policy="on-failure"', "p"], {"approval": "never"}),  # nobody to ask: said on stderr
    (["-c", 'model="a"', "-m", "b", "p"], {"model": "b"}),  # the flag wins
    (["-c", 'model="a"', "p"], {"model": "a"}),
    (["-c", 'sandbox_mode="read-only"', "p"], {"sandbox": "read-only"}),
    (["-c", 'sandbox_mode="read-only"', "--sandbox", "workspace-write", "p"], {"sandbox": "workspace-write"}),
    (["--full-auto", "p"], {"sandbox": "workspace-write"}),
    (["--yolo", "-s", "read-only", "p"], {"sandbox": "danger-full-access"}),
    (["-c", "sandbox_workspace_write.network_access=true", "p"], {"network_access": True}),
    (["-c", 'instructions="be brief"', "-c", 'developer_instructions="no jokes"', "p"],
     {"instructions": "be brief", "developer_instructions": "no jokes"}),
    (["-c", 'model_reasoning_effort="xhigh"', "p"], {"effort": "xhigh"}),
    (["resume", "--last", "p"], {"resume_last": True, "resume": None}),
    (["resume", "--last", "--all"], {"resume_last": True, "resume_all": True}),
])
def test_flags_and_config_keys(argv: list[str], fields: dict[str, Any]) -> None:
    request = request_of(argv if argv[-1] != "--all" else [*argv, "p"])
    assert {name: getattr(request, name) for name in fields} == fields


def test_writable_roots_of_config_are_relative_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    request = request_of(["--cd", str(tmp_path), "-c", 'sandbox_workspace_write.writable_roots=["out"]',
                          "--add-dir", str(tmp_path / "out"), "p"])
    assert request.writable_roots == (str((tmp_path / "out").resolve()),)  # once
    assert sandbox_policy(request) == {"type": "workspaceWrite", "writableRoots": [str((tmp_path / "out").resolve())],
                                       "networkAccess": False}


@pytest.mark.parametrize(("argv", "said"), [
    (["-c", "model_reasoning_effort=max", "p"], "model_reasoning_effort"),
    (["-c", "novalue", "p"], "expected key=value"),
    (["-c", 'approval_policy="sometimes"', "p"], "approval_policy"),
    (["-c", 'sandbox_workspace_write.writable_roots=["/nonexistent/x"]', "p"], "is not an existing directory"),
])
def test_a_bad_config_value_exits_2_naming_the_key(argv: list[str], said: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        request_of(argv)
    assert stopped.value.code == 2 and said in capsys.readouterr().err


def test_unknown_config_keys_are_named_once_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    request_of(["-c", "foo.bar=1", "-c", "baz=2", "p"])
    err = capsys.readouterr().err
    assert err.count("ignoring codex config keys it does not implement: baz, foo.bar") == 1


@pytest.mark.parametrize(("argv", "environ", "key", "base"), [
    ([], {"CODEX_API_KEY": "codex", "OPENAI_API_KEY": "openai"}, "codex", None),
    ([], {"OPENAI_API_KEY": "openai"}, "openai", None),
    (["-c", 'openai_base_url="http://127.0.0.1:9/v1"'], {}, None, "http://127.0.0.1:9/v1"),
    (["--api-base", "http://127.0.0.1:8/v1", "-c", 'openai_base_url="http://127.0.0.1:9/v1"'], {}, None,
     "http://127.0.0.1:8/v1"),
    (["-c", "model_provider=local", "-c", 'model_providers.local.base_url="http://127.0.0.1:7/v1"', "-c",
      "model_providers.local.env_key=LOCAL_KEY"], {"LOCAL_KEY": "local", "CODEX_API_KEY": "codex"}, "local",
     "http://127.0.0.1:7/v1"),
])
def test_the_models_key_and_base_url(argv: list[str], environ: dict[str, str], key: str | None,
                                     base: str | None) -> None:
    parser = exec_parser()
    args = parser.parse_intermixed_args([*argv, "p"])
    env = model_environ(parser, args, codex_settings(parser, args.config), environ)
    assert env.get("OPENAI_API_KEY") == key
    assert args.api_base == base


def test_a_provider_key_variable_that_is_unset_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    parser = exec_parser()
    args = parser.parse_intermixed_args(["-c", "model_provider=local", "-c", "model_providers.local.env_key=NOPE",
                                         "-c", 'model_providers.local.base_url="http://127.0.0.1:7/v1"', "p"])
    with pytest.raises(SystemExit):
        model_environ(parser, args, codex_settings(parser, args.config), {"CODEX_API_KEY": "codex"})
    assert "$NOPE is not set" in capsys.readouterr().err


def test_turn_params_carry_what_was_asked() -> None:
    request = ExecRequest("p", images=("/a.png",), model="m", effort="low", approval="untrusted",
                          output_schema={"type": "object"}, sandbox="read-only", network_access=True)
    assert turn_params("thr", request) == {
        "threadId": "thr", "approvalPolicy": "untrusted", "model": "m", "effort": "low",
        "outputSchema": {"type": "object"}, "sandboxPolicy": {"type": "readOnly", "networkAccess": True},
        "input": [{"type": "localImage", "path": "/a.png"}, {"type": "text", "text": "p", "text_elements": []}]}


@pytest.mark.parametrize(("fields", "policy"), [
    ({}, None),
    ({"network_access": False}, None),  # the default sandbox has no network already
    ({"network_access": True}, {"type": "workspaceWrite", "writableRoots": [], "networkAccess": True}),
    ({"writable_roots": ("/x",)}, {"type": "workspaceWrite", "writableRoots": ["/x"], "networkAccess": False}),
    ({"sandbox": "danger-full-access", "writable_roots": ("/x",), "network_access": True}, None),
    ({"sandbox": "read-only", "network_access": True}, {"type": "readOnly", "networkAccess": True}),
    ({"sandbox": "workspace-write"}, None),  # the thread/start sandbox says it
    ({"sandbox": "workspace-write", "network_access": False},
     {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False}),
])
def test_the_turns_sandbox_policy(fields: dict[str, Any], policy: dict[str, Any] | None) -> None:
    assert sandbox_policy(ExecRequest("p", **fields)) == policy


def test_config_before_the_command_goes_to_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    """``trio-agent -c k=v exec ...``: codex's global ``-c`` reaches exec, in order, before its own."""
    from trio_agent.cli import _main
    from trio_agent.cli._exec import _command

    seen: list[list[str]] = []
    monkeypatch.setattr(_command, "exec_main", lambda argv: seen.append(argv) or 0)
    assert _main.main(["-c", "model=a", "--config=model_verbosity=low", "exec", "-c", "model=b", "p"]) == 0
    assert seen == [["--config=model=a", "--config=model_verbosity=low", "-c", "model=b", "p"]]
