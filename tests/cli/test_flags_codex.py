"""Codex's flags on ``trio-agent run`` (``trio_agent/cli/_codex.py`` has the table):
``-m``, ``-s``, ``-C/--cd``, ``-c key=value``, ``-a``, ``--add-dir`` and ``--json``
do what codex's do, through the installed console script against the built-in local
model (the ``run.started`` event shows the model, the effort and the workspace; a
``run: touch FILE`` prompt makes the local model run a command in the sandbox)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trio_agent.testing import FakeHttpRequest, FakeResponsesServer

from ..conftest import scripted
from ._cli import cli_env
from ._console import refused, script
from .test_flags import KEY, answer


async def test_m_and_cd_set_the_model_and_the_workspace(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for argv in (["-m", "gpt-short", "-C", str(work)], ["--model", "gpt-short", "--cd", str(work)],
                 ["--model", "gpt-short", "--workspace", str(work)]):
        ran = await script("run", "--jsonl", *argv, "hi", cwd=tmp_path)
        assert ran.code == 0, ran.err
        started = ran.event("run.started")
        assert (started["model"], started["workspace"]) == ("gpt-short", str(work)), argv


async def test_json_is_jsonl(tmp_path: Path) -> None:
    both = [await script("run", flag, "hi", cwd=tmp_path) for flag in ("--json", "--jsonl")]
    for ran in both:
        assert ran.code == 0, ran.err
        kinds = [event["type"] for event in ran.events()]  # every stdout line is a JSON event
        assert kinds[-1] == "run.completed" and "run.started" in kinds, kinds
    assert [e["type"] for e in both[0].events()] == [e["type"] for e in both[1].events()]


def _touch(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return work, work / "made"


@pytest.mark.parametrize(("argv", "writes"), [
    (["-s", "read-only"], False),
    (["-s", "workspace-write"], True),  # the control: the same command, allowed
    (["-c", "sandbox_mode=read-only"], False),
    (["-c", 'sandbox_mode="workspace-write"'], True),
    (["-s", "workspace-write", "-c", "sandbox_mode=read-only"], True),  # the flag wins
])  # fmt: skip
async def test_s_and_c_sandbox_mode_confine_commands(tmp_path: Path, argv: list[str], writes: bool) -> None:
    work, made = _touch(tmp_path)
    ran = await script("run", *argv, "-C", str(work), "run: touch made", cwd=tmp_path)
    assert ran.code == 0, ran.err
    assert made.exists() is writes, ran.out
    if not writes:
        assert "Read-only file system" in ran.out


async def test_add_dir_and_writable_roots_make_a_directory_writable(tmp_path: Path) -> None:
    work, _ = _touch(tmp_path)
    (work / "extra").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for argv, target in ((["--add-dir", str(outside)], outside),
                         (["-c", 'sandbox_workspace_write.writable_roots=["extra"]'], work / "extra"),
                         ([], None)):  # the control: neither, and the write is refused
        path = (target or outside) / f"file-{len(argv)}"
        ran = await script("run", *argv, "-C", str(work), f"run: touch {path}", cwd=tmp_path)
        assert ran.code == 0, ran.err
        assert path.exists() is (target is not None), (argv, ran.out)


async def test_c_overrides_configure_the_run_and_flags_win(tmp_path: Path) -> None:
    ran = await script("-c", "model=top", "run", "--jsonl", "-c", 'model_reasoning_effort="high"', "-c",
                       "tools.view_image=true", "hi", cwd=tmp_path)
    assert ran.code == 0, ran.err
    started = ran.event("run.started")
    assert (started["model"], started["effort"]) == ("top", "high")
    assert "trio-agent: ignoring codex config keys it does not implement: tools.view_image" in ran.err.splitlines()
    ran = await script("-c", "model=top", "run", "--jsonl", "-m", "flag", "--thinking", "minimal",
                       "-c", "model_reasoning_effort=high", "hi", cwd=tmp_path)
    started = ran.event("run.started")
    assert (started["model"], started["effort"]) == ("flag", "minimal")


async def _request_of(server: FakeResponsesServer, tmp_path: Path, *argv: str) -> dict[str, Any]:
    """The body of the Responses request ``run ARGV hi`` sends to ``server`` (via -c openai_base_url)."""
    seen: list[FakeHttpRequest] = []

    async def model() -> None:
        request = await server.accept_http()
        seen.append(request)
        await request.send_sse(answer("resp-1", "ok"))

    async with scripted(model, 60):
        ran = await script("run", "-c", f'openai_base_url="{server.http_base_url}"', "--transport", "https", *argv,
                           "hi", cwd=tmp_path, env=cli_env(OPENAI_API_KEY=KEY))
    assert ran.code == 0, ran.err
    assert ran.out.splitlines()[0] == "ok"
    return seen[0].body


async def test_c_instructions_replace_and_developer_instructions_add(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    body = await _request_of(server, tmp_path, "-c", 'instructions="Be terse."')
    assert _instructions(body) == "Be terse."
    body = await _request_of(server, tmp_path, "-c", 'instructions="Be terse."', "-c",
                             'developer_instructions="Use tabs."')
    assert _instructions(body) == "Be terse.\n\nUse tabs."
    body = await _request_of(server, tmp_path, "--instructions", "Flag wins.", "-c", 'instructions="Be terse."')
    assert _instructions(body) == "Flag wins."


def _instructions(body: dict[str, Any]) -> str:
    item = next(item for item in body["input"] if item.get("id") == "msg_trio-agent-instructions")
    text: str = item["content"][0]["text"]
    return text


def _tool_names(body: dict[str, Any]) -> str:
    """The in-band tool definitions (the ``additional_tools`` input item), as text."""
    return json.dumps([item for item in body["input"] if item.get("type") == "additional_tools"])


async def test_c_web_search_disabled_drops_the_tool(server: FakeResponsesServer, tmp_path: Path) -> None:
    off = "Web search (`web__run`) is turned off for this agent"
    assert off not in _tool_names(await _request_of(server, tmp_path))  # the control: on by default
    assert off in _tool_names(await _request_of(server, tmp_path, "-c", 'web_search="disabled"'))
    assert off not in _tool_names(await _request_of(server, tmp_path, "-c", 'web_search="live"'))
    cached = await script("run", "-c", "web_search=cached", "hi", cwd=tmp_path)
    assert "there is no cached search index here, so the web__run tool is left out" in cached.err


@pytest.mark.parametrize(("argv", "env", "says"), [
    (["-c", "sandbox_mode=yolo"], {}, "-c sandbox_mode: must be one of read-only, workspace-write"),
    (["-c", "model"], {}, "expected key=value"),
    (["-c", "approval_policy=on-request"], {},
     "-c approval_policy=on-request asks you on the terminal, and stdin is not a terminal"),
    (["-c", "model_provider=p", "-c", 'model_providers.p.base_url="http://127.0.0.1:1/v1"',
      "-c", "model_providers.p.env_key=NO_SUCH_KEY"], {}, "$NO_SUCH_KEY is not set"),
    (["-c", 'sandbox_workspace_write.writable_roots=["missing"]'], {}, "'missing' is not an existing directory"),
    (["-c", "sandbox_mode=danger-full-access", "--network"], {},
     "--network sets up the sandbox, and -c sandbox_mode danger-full-access has none"),
    (["-s", "nowhere"], {}, "argument -s/--sandbox: invalid choice: 'nowhere'"),
    (["-a", "sometimes"], {}, "argument -a/--ask-for-approval: invalid choice: 'sometimes'"),
])  # fmt: skip
async def test_a_bad_codex_option_exits_2_with_runs_usage(tmp_path: Path, argv: list[str], env: dict[str, str],
                                                           says: str) -> None:
    line = refused(await script("run", *argv, "hi", cwd=tmp_path, env=cli_env(**env)))
    assert line.startswith("trio-agent run: error: ") and says in line, line


async def test_the_provider_key_of_c_env_key_is_used(tmp_path: Path) -> None:
    # The provider's key is a credential: the run goes to that server, not the local model
    # (here a port nothing listens on: the turn fails, it does not fall back).
    ran = await script("run", "--max-attempts", "1", "-c", "model_provider=p", "-c",
                       'model_providers.p.base_url="http://127.0.0.1:9/v1"', "-c", "model_providers.p.env_key=P_KEY",
                       "--transport", "https", "hi", cwd=tmp_path, env=cli_env(P_KEY="sk-p"))
    assert ran.code == 1, (ran.out, ran.err)
    assert "local scripted model" not in ran.out + ran.err
    assert "trio-agent: the turn failed: " in ran.err
