"""The record/replay half of the ``trio-agent`` command line (issue 15).

``trio-agent run --record FILE PROMPT`` records the run into a cassette
(``AgentConfig(record=FILE)``); ``trio-agent replay FILE`` re-runs the recorded
session's prompts and steers against the cassette served as a fake server and
reports whether the agent still behaves the same: exit 0 and one summary line, or
exit 1 with the first difference (a readable diff); exit 2 when the cassette cannot
be replayed. ``_main`` only calls the three functions here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from ..testing import Cassette, ReplayMatch

__all__ = ["STALL_BOUND", "add_record_option", "add_replay_command", "run_replay"]

# Without --timeout: a replay with no delays takes seconds (tools really run); a stalled
# one waits for something the cassette never gives, which the mismatch then names.
STALL_BOUND = 60.0


def add_record_option(run: argparse.ArgumentParser) -> None:
    run.add_argument("--record", type=Path, default=None, metavar="FILE",
                     help="record the session (every frame, request and prompt) into a cassette FILE")


def add_replay_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = sub.add_parser("replay", help="re-run a recorded cassette and check the agent still behaves the same")
    replay.add_argument("cassette", type=Path, help="a cassette written by `trio-agent run --record FILE`")
    replay.add_argument("--workspace", type=Path, default=None, help="where tools run (default: .)")
    replay.add_argument("--timing", type=float, default=0.0, metavar="SCALE",
                        help="replay the recorded gaps between frames times SCALE (default 0: no delays)")
    replay.add_argument("--match", choices=["input", "body"], default="input",
                        help="compare the input items (default) or whole request bodies")
    replay.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help=f"give up after SECONDS and say what the replay waited for (default "
                             f"{STALL_BOUND:g} s plus the recorded duration times --timing)")


def run_replay(args: argparse.Namespace) -> int:
    """``trio-agent replay``: 0 when the replay matched, 1 on a mismatch, 2 on bad input."""
    from ..testing import Cassette, CassetteError, ReplayMatch

    if args.timing < 0 or (args.timeout is not None and args.timeout <= 0):
        print("trio-agent: --timing must be >= 0 and --timeout > 0", file=sys.stderr)
        return 2
    workspace = args.workspace or Path.cwd()
    if not workspace.is_dir():
        print(f"trio-agent: workspace {str(workspace)!r} is not a directory", file=sys.stderr)
        return 2
    try:
        cassette = Cassette.load(args.cassette)
    except CassetteError as exc:
        print(f"trio-agent: {exc}", file=sys.stderr)
        return 2
    limit = args.timeout
    if limit is None:
        recorded = cassette.observations[-1].t if cassette.observations else 0.0
        limit = STALL_BOUND + recorded * args.timing
    try:
        return trio.run(_interruptible, cassette, workspace, args.timing, ReplayMatch(args.match), limit)
    except KeyboardInterrupt:
        return 130


async def _interruptible(cassette: Cassette, workspace: Path, timing: float, match: ReplayMatch, limit: float) -> int:
    """The replay, cancelled by Ctrl-C/SIGTERM with one line and 130/143 (``_signals``)."""
    from ._signals import Interrupts, open_interrupts

    started = trio.current_time()
    replaying = trio.CancelScope()

    async def on_interrupt(_: Interrupts) -> None:
        replaying.cancel()

    async with open_interrupts(Interrupts(), on_interrupt) as interrupts:
        with replaying:
            return await _replay(cassette, workspace, timing, match, limit)
        # Said while signals are still caught, then ignored: one line, whatever comes after (as `run`).
        print(f"-- cancelled by {interrupts.name}: the replay, after {trio.current_time() - started:.1f} s",
              file=sys.stderr, flush=True)
        interrupts.settle()
    return interrupts.exit_code


async def _replay(cassette: Cassette, workspace: Path, timing: float, match: ReplayMatch, limit: float) -> int:
    from ..testing import replay

    result = await replay(cassette, workspace=workspace, timing=timing, match=match, limit=limit)
    if result.mismatch is not None:
        print(str(result.mismatch), flush=True)
        print(result.summary(), flush=True)
        return 1
    print(f"{result.summary()} ({cassette.path})", flush=True)
    return 0
