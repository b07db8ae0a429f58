"""``trio-agent bench``'s command line: its options, checked, and the run, Ctrl-C handled.

Every option is checked when parsed (argparse's usage and one ``error:`` line naming
the option and what it allows, exit 2): ``--runs`` and ``--deltas`` are whole numbers
of at least 1 (the first-token latency needs at least one delta, so ``--deltas 0``
is refused rather than waited for forever), ``--delay-ms`` and ``--think-ms`` finite
numbers of at least 0.

Signals: the benchmark runs inside ``cli._signals.open_interrupts``; the first Ctrl-C
(or SIGTERM) cancels it -- the scripted server's child process is closed and waited
for as on any exit -- and the command prints one ``-- cancelled ...`` line on stderr
and exits 130 (143); a second one exits at once. The child runs in a session of its
own (``_server.open_bench_server``), so a terminal's Ctrl-C reaches only this process
and the child never prints a traceback of its own.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any

import trio

from .._signals import Interrupts, open_interrupts
from . import __doc__ as about
from ._measure import available_paths, format_table, missing_reference, run
from ._server import Settings, serve

__all__ = ["main"]


def _whole(least: int, why: str = "") -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {least}{why}, got {text!r}")
        return value

    return parse


def _milliseconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of milliseconds >= 0, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trio-agent bench", description=(about or "").split("\n\n")[0])
    parser.add_argument("--runs", type=_whole(1), default=30, help="timed runs per path (default: 30)")
    parser.add_argument("--delay-ms", type=_milliseconds, default=5.0, help="one-way network delay (default: 5)")
    parser.add_argument("--think-ms", type=_milliseconds, default=20.0,
                        help="server time before the first delta (default: 20)")
    parser.add_argument("--deltas", type=_whole(1, " (the first token is the first delta)"), default=20,
                        help="text deltas per answer (default: 20)")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    parser.add_argument("--serve", metavar="SETTINGS", help=argparse.SUPPRESS)  # the child-process server
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.serve is not None:
        trio.run(serve, Settings(**json.loads(args.serve)))
        return 0
    settings = Settings(args.delay_ms / 1000, args.think_ms / 1000, args.deltas)
    code: int = trio.run(_command, args, settings)
    return code


async def _command(args: argparse.Namespace, settings: Settings) -> int:
    interrupts = Interrupts()
    started = trio.current_time()
    work = trio.CancelScope()

    async def on_interrupt(_: Interrupts) -> None:
        work.cancel()

    rows: list[dict[str, Any]] = []
    async with open_interrupts(interrupts, on_interrupt):
        with work:
            rows = await run(args.runs, settings, available_paths())
        if interrupts.received:
            print(f"-- cancelled by {interrupts.name}: the benchmark, after {trio.current_time() - started:.1f} s",
                  file=sys.stderr, flush=True)
            interrupts.settle()
            return interrupts.exit_code
    _report(args, rows)
    return 0


def _report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"first-token latency: {args.runs} runs per path, delay {args.delay_ms:.2f} ms one way, "
          f"think {args.think_ms:.2f} ms, {args.deltas} deltas; server in a child process")
    print(format_table(rows))
    print(f"n: samples behind every percentile; p99 is nearest-rank"
          f"{' (with n < 100: the slowest sample)' if args.runs < 100 else ''}; cpu/turn: this process's CPU "
          "from prompt() to turn.result() (no server, agent open or warmup)")
    reason = missing_reference()
    if reason is not None:
        print(f"openai_sdk_https: not run: {reason}")
