"""``trio-agent run``'s command line is parsed by a parser with the ``run`` subcommand
alone (``_main._parsers(run_only=True)``, a fifth of the whole parser's build): the
same namespace, help, usage and errors as the whole command line's parser gives it."""

from __future__ import annotations

import argparse

import pytest

from trio_agent.cli import _main
from trio_agent.cli._main import _parsers

RUN_LINES = [
    ["run", "hi"],
    ["run", "--profile", "openai", "--websocket-url", "ws://127.0.0.1:9/v1/responses", "hello"],
    ["run", "--api-base", "http://127.0.0.1:9/v1", "--transport", "https", "--jsonl", "--ephemeral", "hi"],
    ["-c", "model=gpt-5.5", "run", "-m", "gpt-5.4", "-s", "read-only", "--thinking", "high", "-C", "/tmp", "-"],
    ["run", "--mcp-stdio", "git=uvx mcp-server-git", "--mcp-arg=--repo=.", "--local", "--record", "/tmp/c.jsonl"],
    ["run", "--no-web-search", "--network", "--writable-root", "/tmp", "-a", "never", "hi"],
]
MISTAKES = [
    ["run", "--bogus", "hi"],
    ["run", "--thinking", "extreme", "hi"],
    ["run", "--js", "hi"],  # no abbreviations
    ["run", "hi", "there"],
    ["run", "--model"],
    ["run", "-h"],
    ["run", "--help"],
]


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> dict[str, object]:
    return vars(parser.parse_args(argv))


@pytest.mark.parametrize("argv", RUN_LINES)
def test_a_run_line_parses_as_with_the_whole_parser(argv: list[str]) -> None:
    whole, run_only = _parsers()[0], _parsers(run_only=True)[0]
    assert _parse(run_only, argv) == _parse(whole, argv)


@pytest.mark.parametrize("argv", MISTAKES)
def test_a_mistake_or_the_help_reads_the_same(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    said = []
    for run_only in (False, True):
        with pytest.raises(SystemExit) as exited:
            _parsers(run_only=run_only)[0].parse_args(argv)
        out, err = capsys.readouterr()
        said.append((exited.value.code, out, err))
    assert said[0] == said[1]
    assert said[0][1] or said[0][2]  # it did say something (usage and error, or the help)


def test_main_builds_the_run_only_parser_for_run_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []
    real = _main._parsers

    def recorded(run_only: bool = False) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser,
                                                  argparse.ArgumentParser | None]:
        asked.append(run_only)
        return real(run_only)

    monkeypatch.setattr(_main, "_parsers", recorded)
    for argv in (["run", "--thinking", "extreme", "hi"], ["-c", "k=v", "run", "--bogus"], ["serve", "--bogus"],
                 ["resume", "--bogus"]):
        with pytest.raises(SystemExit):
            _main.main(argv)
    assert asked == [True, True, False, False]
