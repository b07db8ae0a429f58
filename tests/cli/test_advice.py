"""Advice that does not mislead, through the console script: ``--local`` with an
endpoint option says to drop ``--local`` (not to set a key that is set); an endpoint
from the environment without a credential is refused as its flag is (never a silent
switch to the local model); ``OPENAI_API_KEY``'s help names the Codex-login fallback.
The controls: ``--local`` alone, and ``--local`` with ``OPENAI_BASE_URL`` set, answer
with the local model."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._cli import NO_CODEX_HOME, cli_env
from ._console import refused, script

KEY = "sk-advice-dummy"
URL = "http://127.0.0.1:9/v1"
NO_LOGIN = f"no OPENAI_API_KEY set and no Codex login at {NO_CODEX_HOME}/auth.json"


@pytest.mark.parametrize("flag", [["--api-base", URL], ["--websocket-url", "ws://127.0.0.1:9/v1/responses"],
                                  ["--transport", "https"], ["-c", f'openai_base_url="{URL}"']])
async def test_local_with_an_endpoint_and_a_key_says_drop_local(tmp_path: Path, flag: list[str]) -> None:
    line = refused(await script("run", "--local", *flag, "hi", cwd=tmp_path, env=cli_env(OPENAI_API_KEY=KEY)))
    name = "-c openai_base_url" if flag[0] == "-c" else " ".join(flag) if flag[0] == "--transport" else flag[0]
    assert line == (f"trio-agent run: error: {name} configures the real Responses API, and --local uses the built-in "
                    f"local scripted model instead: drop --local to use the real API, or drop {name}")
    assert "OPENAI_API_KEY" not in line  # it is set: not the problem


async def test_local_with_an_endpoint_and_no_key_says_both(tmp_path: Path) -> None:
    line = refused(await script("run", "--local", "--api-base", URL, "hi", cwd=tmp_path))
    assert "drop --local to use the real API (and set OPENAI_API_KEY: any value for a server that ignores it)" in line


@pytest.mark.parametrize("name", ["OPENAI_BASE_URL", "OPENAI_API_BASE_URL", "OPENAI_RESPONSES_WEBSOCKET_URL"])
async def test_an_endpoint_variable_without_a_credential_is_refused_as_its_flag_is(tmp_path: Path, name: str) -> None:
    value = URL if "BASE" in name else "ws://127.0.0.1:9/v1/responses"
    line = refused(await script("run", "hi", cwd=tmp_path, env=cli_env(**{name: value})))
    assert line == (f"trio-agent run: error: {name}={value!r} talks to a real Responses API, which needs a "
                    f"credential, but {NO_LOGIN}: set OPENAI_API_KEY (any value for a server that ignores it), or "
                    f"unset {name} (or pass --local) to use the built-in local scripted model")


async def test_the_flag_without_a_credential_says_the_same(tmp_path: Path) -> None:
    line = refused(await script("run", "--api-base", URL, "hi", cwd=tmp_path))
    assert line == (f"trio-agent run: error: --api-base talks to a real Responses API, which needs a credential, "
                    f"but {NO_LOGIN}: set OPENAI_API_KEY (any value for a server that ignores it), or drop "
                    "--api-base to use the built-in local scripted model")


@pytest.mark.parametrize("env", [{}, {"OPENAI_BASE_URL": URL}, {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": URL}])
async def test_local_answers_with_the_local_model_whatever_the_environment(
    tmp_path: Path, env: dict[str, str]
) -> None:
    ran = await script("run", "--local", "hi", cwd=tmp_path, env=cli_env(**env))
    assert ran.code == 0, ran.err
    assert "Hello from trio_agent's local scripted model." in ran.out


async def test_the_help_names_the_codex_login_fallback(tmp_path: Path) -> None:
    for argv in (["--help"], ["run", "--help"]):
        ran = await script(*argv, cwd=tmp_path)
        assert ran.code == 0
        lines = ran.out.split("environment variables:\n", 1)[1].splitlines()
        key = " ".join(" ".join(lines[:3]).split())
        assert key.startswith("OPENAI_API_KEY the API key; without it, the key or ChatGPT sign-in of an existing "
                              "Codex login ($CODEX_HOME/auth.json)"), key
        assert any(line.strip().startswith("CODEX_HOME ") for line in lines)
