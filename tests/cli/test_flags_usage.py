"""No abbreviations, and each subcommand's own usage on its errors: the console script
refuses a prefix of an option (``--js`` is not ``--jsonl``) and a mistake in ``run``'s
(``serve``'s, ``exec``'s, ...) arguments is reported under that command's usage, exit 2,
with no traceback. The controls: the same options spelled out work."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._console import refused, script


async def test_an_unknown_option_of_run_gets_runs_usage(tmp_path: Path) -> None:
    ran = await script("run", "--bogus", "hi", cwd=tmp_path)
    assert ran.code == 2 and ran.out == ""
    assert ran.err == ("usage: trio-agent run [options] [PROMPT | -]\n"
                       "trio-agent run: error: unrecognized arguments: --bogus\n")


@pytest.mark.parametrize(("argv", "usage"), [
    (["serve", "--bogus"], "trio-agent serve"),
    (["app-server", "--bogus"], "trio-agent app-server"),
    (["app-server", "generate-json-schema", "--out", "x", "--bogus"], "trio-agent app-server generate-json-schema"),
    (["replay", "cassette.jsonl", "--bogus"], "trio-agent replay"),
    (["exec", "--bogus", "hi"], "trio-agent exec"),
])  # fmt: skip
async def test_each_command_reports_its_own_unknown_options(tmp_path: Path, argv: list[str], usage: str) -> None:
    line = refused(await script(*argv, cwd=tmp_path), usage=usage)
    assert line == f"{usage}: error: unrecognized arguments: --bogus"


@pytest.mark.parametrize(("argv", "prefix"), [
    (["run", "--js", "hi"], "--js"),  # of --jsonl / --json
    (["run", "--work", ".", "hi"], "--work"),  # of --workspace
    (["run", "--think", "high", "hi"], "--think"),  # of --thinking
    (["exec", "--jso", "hi"], "--jso"),  # of exec's --json
])  # fmt: skip
async def test_a_prefix_of_an_option_is_not_that_option(tmp_path: Path, argv: list[str], prefix: str) -> None:
    line = refused(await script(*argv, cwd=tmp_path), usage=f"trio-agent {argv[0]}")
    assert line.startswith(f"trio-agent {argv[0]}: error: unrecognized arguments: {prefix}"), line


async def test_the_options_spelled_out_work(tmp_path: Path) -> None:
    ran = await script("run", "--jsonl", "--workspace", str(tmp_path), "--thinking", "high", "hi", cwd=tmp_path)
    assert ran.code == 0, ran.err
    assert ran.event("run.started")["effort"] == "high"
