"""``trio-agent --version`` and the model connection options of ``trio-agent run``
(flags and their environment defaults), run as the console script against a
``FakeResponsesServer`` this test serves on 127.0.0.1 (with a dummy ``OPENAI_API_KEY``,
so that the real path is taken), and what bad values do (exit 2, saying what to do)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import trio_agent as ta
from trio_agent.testing import FakeHttpRequest, FakeResponsesServer, frames

from ..conftest import scripted
from ._cli import cli_env, progress, run_cli

KEY = "sk-cli-dummy"


def answer(response_id: str, text: str) -> list[dict[str, Any]]:
    message = frames.assistant_message(text, item_id=f"msg_{response_id}")
    return [frames.response_created(response_id), frames.output_item_added(0, {**message, "content": []}),
            frames.text_delta(0, text), frames.output_item_done(0, message), frames.completed(response_id, [message])]


async def _https_run(
    server: FakeResponsesServer, tmp_path: Path, *args: str, **env: str
) -> tuple[Any, FakeHttpRequest]:
    seen: list[FakeHttpRequest] = []

    async def model() -> None:
        request = await server.accept_http()
        seen.append(request)
        await request.send_sse(answer("resp-1", "hello over https"))

    async with scripted(model, 60):
        result = await run_cli(*args, "--workspace", str(tmp_path), "hi", cwd=tmp_path,
                               env=cli_env(OPENAI_API_KEY=KEY, **env))
    return result, seen[0]


async def test_version(tmp_path: Path) -> None:
    result = await run_cli("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.decode() == f"trio-agent {ta.__version__}\n"


async def test_help_lists_the_environment_variables(tmp_path: Path) -> None:
    for args in (["--help"], ["run", "--help"]):
        shown = (await run_cli(*args, cwd=tmp_path)).stdout.decode()
        assert "environment variables:" in shown
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_RESPONSES_WEBSOCKET_URL",
                     "NANOCODEX_RESPONSES_TRANSPORT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
            assert name in shown, (args, name)


async def test_api_base_with_the_https_transport_talks_to_that_server(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    result, request = await _https_run(server, tmp_path, "run", "--api-base", server.http_base_url,
                                       "--transport", "https", PYTHONPROFILEIMPORTTIME="1")
    assert result.returncode == 0, result.stderr.decode()
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.decode().splitlines()
                if line.startswith("import time:")]
    assert "trio_agent.cli._run" in imported
    assert not [name for name in imported if name.startswith("trio_agent.testing")]  # the real path stays lean
    assert result.stdout.decode() == "hello over https\n"  # stdout: the answer only
    err = result.stderr.decode()
    assert "local scripted model" not in err
    assert progress(err)[-1].startswith("-- completed: 1 model call(s), ")
    assert (request.method, request.path) == ("POST", "/v1/responses")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["input"][-1]["content"][0]["text"] == "hi"


async def test_the_environment_gives_the_base_url_and_the_transport(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    result, request = await _https_run(server, tmp_path, "run", OPENAI_BASE_URL=server.http_base_url,
                                       NANOCODEX_RESPONSES_TRANSPORT="http")
    assert result.returncode == 0, result.stderr.decode()
    assert "hello over https" in result.stdout.decode()
    assert request.headers["authorization"] == f"Bearer {KEY}"


async def test_instructions_from_a_file_are_sent(server: FakeResponsesServer, tmp_path: Path) -> None:
    (tmp_path / "rules.md").write_text("Answer in haiku.\n")
    result, request = await _https_run(server, tmp_path, "run", "--api-base", server.http_base_url,
                                       "--transport", "https", "--instructions", "@rules.md")
    assert result.returncode == 0, result.stderr.decode()
    instructions = [item for item in request.body["input"] if item.get("id") == "msg_trio-agent-instructions"]
    assert instructions[0]["content"][0]["text"] == "Answer in haiku.\n"  # in place of the default


async def test_the_websocket_url_is_derived_from_the_api_base(server: FakeResponsesServer, tmp_path: Path) -> None:
    async def model() -> None:
        conn = await server.accept()  # ws://127.0.0.1:PORT/v1/responses, from http://127.0.0.1:PORT/v1
        await conn.next_request()  # the prompt, at once: the CLI sends no warmup
        await conn.send_all(answer("resp-1", "hello over a websocket"))

    async with scripted(model, 60):
        result = await run_cli("run", "--api-base", server.http_base_url, "--workspace", str(tmp_path), "hi",
                               cwd=tmp_path, env=cli_env(OPENAI_API_KEY=KEY))
    assert result.returncode == 0, result.stderr.decode()
    assert "hello over a websocket" in result.stdout.decode()
    assert server.handshakes[0].headers["authorization"] == f"Bearer {KEY}"


RETRY = re.compile(r"retrying in (\d+ ms|\d+\.\d s): (.+) \(attempt (\d+)/(\d+)\)")


async def test_one_line_per_retry(server: FakeResponsesServer, tmp_path: Path) -> None:
    async def model() -> None:
        conn = await server.accept()
        await conn.next_request()  # the prompt, at once: the CLI sends no warmup
        await conn.send(frames.response_created("resp-1"))
        await conn.drop()  # mid-response: a retry on a new socket, replaying in full
        retry = await server.accept()
        await retry.next_request()
        await retry.send_all(answer("resp-2", "second time lucky"))

    async with scripted(model, 60):
        result = await run_cli("run", "--websocket-url", server.url, "--max-attempts", "3", "--workspace",
                               str(tmp_path), "hi", cwd=tmp_path, env=cli_env(OPENAI_API_KEY=KEY))
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stderr.decode().splitlines()  # progress: on stderr
    retries = [m.groups() for line in lines if (m := RETRY.fullmatch(line))]
    assert [(reason, attempt, most) for _, reason, attempt, most in retries] == [("connection lost", "2", "3")]
    assert result.stdout.decode() == "second time lucky\n"


async def test_max_attempts_bounds_the_retries(server: FakeResponsesServer, tmp_path: Path) -> None:
    async def model() -> None:
        for _ in range(2):
            request = await server.accept_http()
            await request.respond(500, '{"error": {"message": "boom", "type": "server_error"}}')

    async with scripted(model, 60):
        result = await run_cli("run", "--api-base", server.http_base_url, "--transport", "https",
                               "--max-attempts", "2", "--workspace", str(tmp_path), "hi", cwd=tmp_path,
                               env=cli_env(OPENAI_API_KEY=KEY))
    assert result.returncode == 1
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    retries = [m.groups() for line in lines if (m := RETRY.fullmatch(line))]
    assert [(reason, attempt, most) for _, reason, attempt, most in retries] == [("server error", "2", "2")]
    assert "trio-agent: the turn failed: " in result.stderr.decode()


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--max-attempts", "0"], {}, "expected a whole number of attempts >= 1, got '0'"),
        (["--transport", "carrier-pigeon"], {}, "invalid choice: 'carrier-pigeon'"),
        (["--api-base", "ftp://example.com"], {"OPENAI_API_KEY": KEY}, "is not a http or https URL"),
        (["--websocket-url", "https://example.com"], {"OPENAI_API_KEY": KEY}, "is not a ws or wss URL"),
        ([], {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "example.com"}, "OPENAI_BASE_URL='example.com' is not"),
        ([], {"OPENAI_API_KEY": KEY, "NANOCODEX_RESPONSES_TRANSPORT": "smoke"},
         "NANOCODEX_RESPONSES_TRANSPORT='smoke' is not a transport"),
        (["--api-base", "https://example.com/v1"], {}, "set OPENAI_API_KEY (any value for a server that ignores it)"),
        (["--local", "--transport", "https"], {"OPENAI_API_KEY": KEY}, "drop --local to use the real API, or drop"),
        (["--instructions", "@missing.md"], {}, "cannot read 'missing.md'"),
        (["--instructions", "  "], {}, "is empty"),
    ],
)  # fmt: skip
async def test_bad_values_exit_2_saying_what_to_do(
    tmp_path: Path, args: list[str], env: dict[str, str], says: str
) -> None:
    result = await run_cli("run", *args, "hi", cwd=tmp_path, env=cli_env(**env))
    assert result.returncode == 2
    err = result.stderr.decode()
    assert err.startswith("usage: trio-agent run ")
    assert says in err, err
    assert result.stdout == b""


async def test_without_an_api_key_an_existing_codex_login_is_used(server: FakeResponsesServer, tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "auth.json").write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-from-codex"}')
    seen: list[FakeHttpRequest] = []

    async def model() -> None:
        request = await server.accept_http()
        seen.append(request)
        await request.send_sse(answer("resp-1", "hello via codex login"))

    env = cli_env(CODEX_HOME=str(home))
    async with scripted(model, 60):
        result = await run_cli("run", "--api-base", server.http_base_url, "--transport", "https",
                               "--workspace", str(tmp_path), "hi", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert seen[0].headers["authorization"] == "Bearer sk-from-codex"
    assert f"trio-agent: signed in with the Codex login at {home / 'auth.json'} (an API key)" in result.stderr.decode()
    assert "hello via codex login" in result.stdout.decode()


async def test_a_broken_codex_login_is_an_error_not_the_local_model(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "auth.json").write_text("{not json")
    result = await run_cli("run", "hi", cwd=tmp_path, env=cli_env(CODEX_HOME=str(home)))
    assert result.returncode == 2
    error = result.stderr.decode()
    assert "is not JSON" in error and "run `codex login` again" in error and "or pass --local" in error
    assert "local scripted model" not in result.stdout.decode() + error


async def test_without_any_credential_the_local_model_says_why(tmp_path: Path) -> None:
    result = await run_cli("run", "hi", cwd=tmp_path)
    assert result.returncode == 0
    first = result.stderr.decode().splitlines()[0]  # a notice: on stderr
    assert result.stdout.decode().startswith("Hello from trio_agent's local scripted model.")
    assert first.startswith("trio-agent: no OPENAI_API_KEY set and no Codex login at ")
    assert first.endswith("; using the built-in local scripted model (not a real model)")
