"""``trio-agent run`` against a server other than OpenAI's (issue 25): the profile derived
from ``--api-base`` or given (``--profile``, ``$TRIO_AGENT_PROFILE``), ``--store``/
``--no-store``, ``--history`` and ``--thinking none``, and the WebSocket -> HTTPS
fallback's one line on stderr. The command runs as a subprocess against a
``FakeResponsesServer`` on 127.0.0.1, as it would against LiteLLM there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trio_agent.testing import FakeHttpRequest, FakeResponsesServer, frames

from ..conftest import scripted
from ._cli import cli_env, run_cli

KEY = "sk-cli-dummy"


def env(**extra: str) -> dict[str, str]:
    """A user's environment: no profile variable (the suite sets one for its other tests)."""
    environ = cli_env(OPENAI_API_KEY=KEY, **extra)
    if "TRIO_AGENT_PROFILE" not in extra:
        environ.pop("TRIO_AGENT_PROFILE", None)
    return environ


async def run(server: FakeResponsesServer, tmp_path: Path, *args: str, reject: int | None = None,
              **extra: str) -> tuple[Any, FakeHttpRequest]:
    seen: list[FakeHttpRequest] = []

    async def model() -> None:
        if reject is not None:
            await (await server.accept_raw()).reject(reject, '{"detail":"Not Found"}')
        request = await server.accept_http()
        seen.append(request)
        await request.send_sse([frames.completed("resp-1", [frames.assistant_message("the answer")])])

    async with scripted(model, 60):
        result = await run_cli("run", "--api-base", server.http_base_url, *args, "--workspace", str(tmp_path), "hi",
                               cwd=tmp_path, env=env(**extra))
    return result, seen[0]


async def test_a_loopback_server_gets_the_generic_profile_through_the_fallback(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    result, request = await run(server, tmp_path, reject=404)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == "the answer\n"
    err = result.stderr.decode()
    [note] = [line for line in err.splitlines() if line.startswith("note: ")]
    assert "HTTP 404" in note and "using HTTPS" in note
    body = request.body
    assert [tool["name"] for tool in body["tools"]] == ["exec", "wait"]  # type: ignore[index, union-attr]
    assert body["store"] is False and "reasoning" not in body and "include" not in body  # --thinking: none here
    assert request.path == "/v1/responses"


async def test_the_flags_choose_profile_store_history_and_thinking(server: FakeResponsesServer, tmp_path: Path) -> None:
    result, request = await run(server, tmp_path, "--transport", "https", "--profile", "openai", "--no-store",
                                "--history", "full", "--thinking", "none")
    assert result.returncode == 0, result.stderr.decode()
    body = request.body
    assert "tools" not in body and body["input"][0]["type"] == "additional_tools"  # type: ignore[index]
    assert body["store"] is False
    assert body["reasoning"] == {"effort": "none", "context": "all_turns"}


async def test_the_profile_variable_is_the_default_of_the_flag(server: FakeResponsesServer, tmp_path: Path) -> None:
    result, request = await run(server, tmp_path, "--transport", "https", "--store", TRIO_AGENT_PROFILE="openai")
    assert result.returncode == 0, result.stderr.decode()
    assert request.body["store"] is True and request.body["input"][0]["type"] == "additional_tools"  # type: ignore[index]


async def test_a_generic_server_that_keeps_responses_may_chain(server: FakeResponsesServer, tmp_path: Path) -> None:
    result, request = await run(server, tmp_path, "--transport", "https", "--store", "--thinking", "low")
    assert result.returncode == 0, result.stderr.decode()
    assert request.body["store"] is True and request.body["reasoning"] == {"effort": "low"}


async def test_bad_values_exit_2_saying_what_to_do(tmp_path: Path) -> None:
    bad = await run_cli("run", "--api-base", "http://127.0.0.1:9/v1", "hi", cwd=tmp_path,
                        env=env(TRIO_AGENT_PROFILE="vllm"))
    assert bad.returncode == 2
    assert "TRIO_AGENT_PROFILE='vllm' is not a profile: set it to openai or generic" in bad.stderr.decode()
    both = await run_cli("run", "--api-base", "http://127.0.0.1:9/v1", "--transport", "https", "--no-store",
                         "--history", "incremental", "hi", cwd=tmp_path, env=env())
    assert both.returncode == 2
    assert "HTTPS chains only on stored responses" in both.stderr.decode()
    flag = await run_cli("run", "--profile", "vllm", "hi", cwd=tmp_path, env=env())
    assert flag.returncode == 2 and "invalid choice: 'vllm'" in flag.stderr.decode()
