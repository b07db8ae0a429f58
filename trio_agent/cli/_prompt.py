"""The prompt of ``trio-agent run``: the argument, else stdin, as codex exec takes it.

- ``trio-agent run PROMPT``: PROMPT. Stdin is not read, even when it is a pipe: a
  script that runs ``trio-agent run "..."`` with an open stdin it never closes must not
  hang, and a run the warm daemon serves (which gets the argument only) must see the
  same prompt. (codex exec appends piped stdin to the argument as a ``<stdin>`` block;
  here, write ``... | trio-agent run -`` and put the whole prompt on stdin.)
- ``trio-agent run -``: all of stdin, to its end (on a terminal: until Ctrl-D).
- ``trio-agent run`` with no prompt: all of stdin when it is not a terminal (after
  ``Reading prompt from stdin...`` on stderr, as codex exec says it); on a terminal,
  an error that says how to give one.

A prompt that is empty or only whitespace -- the argument, or stdin -- is refused, as
is stdin that is not UTF-8 (a leading byte-order mark is dropped): one line on stderr
naming what was wrong and how to give a prompt, exit status 2 (:class:`PromptError`,
which the CLI prints). Nothing has started by then.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["PromptError", "decode_stdin", "read_prompt"]

_HOW = "give it as an argument (trio-agent run 'what to do') or on stdin (echo 'what to do' | trio-agent run -)"


class PromptError(ValueError):
    """Why there is no prompt to send (one line; exit status 2)."""


def decode_stdin(data: bytes) -> str:
    """``data`` read from stdin as UTF-8 (a byte-order mark dropped); ``PromptError`` if it is not."""
    try:
        return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PromptError(f"stdin is not UTF-8 (invalid byte at offset {exc.start}); convert it, e.g. "
                          "iconv -f ENCODING -t UTF-8") from None


def read_prompt(prompt_arg: str | None, stdin: TextIO | None) -> str:
    """The prompt of ``prompt_arg`` (None: none given; ``-``: stdin) and ``stdin``
    (None: closed); ``PromptError`` when there is none."""
    if prompt_arg is not None and prompt_arg != "-":
        if not prompt_arg.strip():
            raise PromptError(f"the prompt is empty; {_HOW}")
        return prompt_arg
    if stdin is None:
        raise PromptError(f"no prompt, and stdin is closed; {_HOW}")
    if prompt_arg is None:
        if stdin.isatty():
            raise PromptError(f"no prompt; {_HOW}")
        print("Reading prompt from stdin...", file=sys.stderr, flush=True)
    text = decode_stdin(stdin.buffer.read())
    if not text.strip():
        raise PromptError("the prompt is empty: stdin held no text; pipe the prompt into stdin, or give it as an "
                          "argument (trio-agent run 'what to do')")
    return text
