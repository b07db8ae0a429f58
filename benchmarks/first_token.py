"""First-token latency per warmup path; see ``trio_agent/cli/_bench/`` (also ``trio-agent bench``).

The same command and table; under ``run_all`` (``BENCH_SUMMARY`` set) it also records the
mission's own metric for the summary and the README table: time to the first token the
application receives, per path, over the floor of its wire measured in the same run.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import trio

from trio_agent.cli._bench import _command
from trio_agent.cli._bench._measure import available_paths, run
from trio_agent.cli._bench._server import Settings

from ._common import record_summary

# the rows the summary keeps: the warm paths and the cold ones a CLI or an HTTPS user meets
SUMMARY_PATHS = ("startup_prewarm", "cold_connect", "https_shared_client", "https_store")


def summary_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    """``[metric, ours, floor, ratio, target]`` per kept path (first token received)."""
    by_path = {r["path"]: r for r in rows}
    out = []
    for name in SUMMARY_PATHS:
        if name in by_path:
            r = by_path[name]
            floor = by_path[r["floor"]]
            # The metric's name is the same in every run (run_all's README table keys rows by it);
            # the p99 and n go with the value.
            out.append([f"first token received, {name}",
                        f"{r['first_recv_p50_ms']:.2f} ms (p99 {r['first_recv_p99_ms']:.2f} ms, n={r['runs']})",
                        f"{floor['first_recv_p50_ms']:.2f} ms ({r['floor'].removesuffix('_floor')})",
                        f"{r['ratio_to_floor']:.2f}x", "report"])
    return out


def main(argv: list[str] | None = None) -> int:
    if not os.environ.get("BENCH_SUMMARY"):
        return _command.main(argv)
    args = _command._parser().parse_args(sys.argv[1:] if argv is None else argv)
    settings = Settings(args.delay_ms / 1000, args.think_ms / 1000, args.deltas)
    rows = trio.run(run, args.runs, settings, available_paths())
    _command._report(args, rows)
    record_summary(summary_rows(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
