"""The argument parsers of the ``trio-agent`` command line: no abbreviations, and each
subcommand's own usage on its errors.

argparse accepts any unambiguous prefix of a long option by default (``--js`` for
``--jsonl``), so a typo or another tool's flag can silently become one of ours, and
an option added later can break a command line that used to work. Every parser of
the command line is therefore built with ``allow_abbrev=False``: an option is taken
only as it is spelled (or by one of its declared aliases).

argparse also hands a subcommand's unrecognised arguments back to the top-level
parser, which reports them under the top-level usage (``usage: trio-agent [-h] ...
{run,serve,...}``), the one usage that does not help. :class:`SubcommandParser`, the
class of every subcommand parser (``add_subparsers(parser_class=...)``, inherited by
nested ones), reports them itself: ``trio-agent run --bogus`` prints run's usage and
``trio-agent run: error: unrecognized arguments: --bogus``, exit status 2.

:func:`refuse` is for a mistake that needs no usage: one line, ``PROG: error: ...``,
exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["Parser", "SubcommandParser", "refuse"]


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that takes options only as spelled (``allow_abbrev=False``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


class SubcommandParser(Parser):
    """A subcommand's parser: its unrecognised arguments are its own error (its usage)."""

    def parse_known_args(  # type: ignore[override]  # argparse's overloads, one signature here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def refuse(prog: str, message: str) -> NoReturn:
    """One line on stderr, ``PROG: error: MESSAGE``, and exit status 2 (as argparse's errors)."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)
