"""``trio-agent run``'s prompt, as codex exec takes it: the argument, ``-`` (stdin), or
stdin when no prompt is given and stdin is not a terminal; an empty or blank prompt
-- argument or stdin -- is one line on stderr and exit 2, never a traceback. The
controls: a real prompt, each way, reaches the (local) model."""

from __future__ import annotations

import os
import pty
import subprocess
from functools import partial
from pathlib import Path

import pytest
import trio

from ._cli import cli_env
from ._console import SCRIPT, TRACEBACK, refused, script

HOW = "give it as an argument (trio-agent run 'what to do') or on stdin (echo 'what to do' | trio-agent run -)"
EMPTY_STDIN = ("trio-agent run: error: the prompt is empty: stdin held no text; pipe the prompt into stdin, or give "
               "it as an argument (trio-agent run 'what to do')")


def said(text: str) -> str:
    return f"You said: {text!r}."  # the local scripted model's answer


@pytest.mark.parametrize("prompt", ["", " ", "\n\t  \n"])
async def test_an_empty_or_blank_prompt_is_one_line_and_exit_2(tmp_path: Path, prompt: str) -> None:
    line = refused(await script("run", prompt, cwd=tmp_path), usage=None)
    assert line == f"trio-agent run: error: the prompt is empty; {HOW}"


@pytest.mark.parametrize(("argv", "stdin"), [(["-"], b""), (["-"], b" \n\n"), ([], b""), ([], b"\t\n")])
async def test_an_empty_stdin_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], stdin: bytes) -> None:
    ran = await script("run", *argv, cwd=tmp_path, stdin=stdin)
    assert ran.code == 2 and ran.out == ""
    reading = [] if argv else ["Reading prompt from stdin..."]
    assert ran.err.splitlines() == [*reading, EMPTY_STDIN]


async def test_stdin_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    line = refused(await script("run", "-", cwd=tmp_path, stdin=b"caf\xe9\n"), usage=None)
    assert line.startswith("trio-agent run: error: stdin is not UTF-8 (invalid byte at offset 3)"), line


async def test_dash_reads_the_prompt_from_stdin(tmp_path: Path) -> None:
    ran = await script("run", "-", cwd=tmp_path, stdin=b"list the files\n")
    assert ran.code == 0, ran.err
    assert said("list the files") in ran.out  # (the local model strips what it quotes)
    assert "Reading prompt from stdin" not in ran.err  # asked for: nothing to explain


async def test_no_prompt_reads_a_piped_stdin(tmp_path: Path) -> None:
    ran = await script("run", "--jsonl", cwd=tmp_path, stdin=b"\xef\xbb\xbfwhat is here?")  # a BOM is dropped
    assert ran.code == 0, ran.err
    assert ran.err.splitlines()[0] == "Reading prompt from stdin..."
    assert any(said("what is here?") in line for line in ran.out.splitlines())


async def test_a_prompt_argument_does_not_read_stdin(tmp_path: Path) -> None:
    # stdin is a pipe this test never closes: a command that read it would never end
    async with trio.open_nursery() as nursery:
        process = await nursery.start(partial(
            trio.run_process, [str(SCRIPT), "run", "hi"], cwd=tmp_path, env=cli_env(), stdin=subprocess.PIPE,
            capture_stdout=True, capture_stderr=True, check=False))
        with trio.fail_after(60):
            await process.wait()
        assert process.stdin is not None
        await process.stdin.aclose()
    assert process.returncode == 0


async def test_no_prompt_on_a_terminal_says_how_to_give_one(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        process = await trio.lowlevel.open_process([str(SCRIPT), "run"], cwd=tmp_path, env=cli_env(), stdin=terminal,
                                                   stdout=terminal, stderr=terminal)
    finally:
        os.close(terminal)
    shown = b""
    async with trio.lowlevel.FdStream(controller) as stream:
        with trio.fail_after(60):
            try:
                while data := await stream.receive_some(65536):
                    shown += data
            except (trio.BrokenResourceError, OSError):  # EIO: the command exited, closing the terminal
                pass
            code = await process.wait()
    assert code == 2
    assert TRACEBACK not in shown.decode()
    assert shown.decode().splitlines() == [f"trio-agent run: error: no prompt; {HOW}"]
