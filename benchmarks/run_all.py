"""Every benchmark of issue 13 in one go, and one table of the headline ratios.

Runs, each in its own process: ``first_token`` (``trio-agent bench``),
``turn_overhead``, ``history_size``, ``scale``, ``cold_cli``, ``warm_daemon`` and
``serve_load`` (the last three with ``--codex PATH`` when given; ``warm_daemon``
otherwise finds the offline npm install of codex by itself), prints each one's full
output, then the summary: ours, the floor (or codex) measured in the same run, the
ratio or added time, and the issue's target. About 3-4 minutes on the 2-core machine
(``--quick``: about one; ``scale`` then only opens 1,000 agents).

    /work/main/.venv/bin/python -m benchmarks.run_all [--quick] [--codex PATH] [--before PYTHON]

``thread_store`` (issue 23, item 4: ``thread/list`` and ``thread/read`` at 10,000 saved
threads; ``--quick``: 2,000) runs after ``scale``; ``tool_dispatch`` (issue 27, item 1: how
soon a streamed tool call starts, and the tool-calling step, against the bare floor; with
``--before PYTHON``, another tree's Python, also against that tree) after ``turn_overhead``,
then ``builtins`` (issue 28, item 3: exec_command on pipes and on a terminal, view_image fitting).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from ._common import table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--codex", default=None)
    parser.add_argument("--before", default=None, help="tool_dispatch: the Python of a tree to compare with")
    args = parser.parse_args(argv)
    quick = args.quick
    steps = [
        ["benchmarks.first_token", "--runs", "10" if quick else "30"],
        ["benchmarks.turn_overhead", "--pairs", "100" if quick else "300"],
        ["benchmarks.tool_dispatch", "--rounds", "1" if quick else "3",
         *(["--before", args.before] if args.before else [])],
        ["benchmarks.builtins", "--runs", "10" if quick else "40"],
        ["benchmarks.history_size", *(["--sizes", "100,1000,10000"])],
        ["benchmarks.scale", "--counts", "1000" if quick else "1000,10000"],
        ["benchmarks.thread_store", "--threads", "2000" if quick else "10000", "--lists", "50" if quick else "200",
         "--budget", "10" if quick else "30"],
        ["benchmarks.cold_cli", "--runs", "5" if quick else "15", *(["--codex", args.codex] if args.codex else [])],
        ["benchmarks.warm_daemon", "--runs", "5" if quick else "15", *(["--codex", args.codex] if args.codex else [])],
        ["benchmarks.serve_load", *(["--quick"] if quick else []), *(["--codex", args.codex] if args.codex else [])],
    ]
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cpus, load average {load[0]:.2f} at start (other processes share the cores: "
          "compare ratios measured in the same run, not absolute numbers across runs)\n", flush=True)
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as summary:
        env = {**os.environ, "BENCH_SUMMARY": summary.name}
        for step in steps:
            start = time.perf_counter()
            print(f"== python -m {' '.join(step)}", flush=True)
            subprocess.run([sys.executable, "-m", *step], check=True, env=env)
            print(f"   ({time.perf_counter() - start:.0f} s)\n", flush=True)
        rows = [json.loads(line) for line in summary.read().splitlines() if line.strip()]
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    print(table("summary: ours vs the floor measured in the same run, against issue 13's targets",
                ["metric", "ours", "floor", "ratio / added", "target"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
