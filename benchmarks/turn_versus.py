"""Issue 30 item 4 before/after: ``turn_overhead``'s judged rows for two trees in one run.

Both sides run THIS tree's ``turn_overhead`` (the same benchmark code, the same bare
clients) in a child process, each against its own ``trio_agent``: "after" is this tree;
"before" is another tree (``--before-tree``, run by ``--before-python``), imported through
a directory that holds only a link to this tree's ``benchmarks`` and comes first on the
child's path. Blocks alternate before, after, after, before (so neither side always runs
first or last); a side's blocks are pooled, each agent turn paired with the bare
client's turn of its own round in its own process. ``--runs 2`` repeats the whole set
back to back; the table gives each run and the p50 of the runs (with two runs, their
mean). The judged rows are the ``api_events=False`` ones: added time p50 (ours' p50
minus the floor's), the p99 of the paired differences with ``n``, and the CPU ratio
(p50 over p50, this process only).

    .venv/bin/python -m benchmarks.turn_versus --before-tree /work/wt/base31 \\
        --before-python /work/main/.venv/bin/python [--pairs 100] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._common import pct, table

ROOT = Path(__file__).resolve().parent.parent
JUDGED = [(name, rtt) for rtt in (0, 25) for name in ("ws", "https")]
TARGETS = {"ws": ("+0.3 ms", "(informative)"), "https": ("+0.7 ms", "1.2x")}


def _label(name: str, rtt: int) -> str:
    return f"{name} warm turn, api_events=False, rtt {rtt} ms"


def _block(python: str, tree: Path | None, pairs: int, shadow: Path) -> dict[str, Any]:
    """One child run of ``turn_overhead``; its judged rows' samples."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = dict(os.environ)
        env.pop("BENCH_SUMMARY", None)
        cwd = ROOT
        if tree is not None:
            env["PYTHONPATH"] = f"{shadow}{os.pathsep}{tree}"
            cwd = shadow
        subprocess.run([python, "-m", "benchmarks.turn_overhead", "--pairs", str(pairs), "--samples", out.name],
                       cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
        samples: dict[str, Any] = json.load(open(out.name))
        return samples


def _figures(pooled: dict[str, dict[str, list[list[float]]]], label: str) -> tuple[float, float, int, float]:
    """added p50 (ms), paired p99 (ms), n, CPU ratio."""
    ours, floor = pooled[label]["ours"], pooled[label]["floor"]
    total = [t[1] for t in ours], [t[1] for t in floor]
    added = (statistics.median(total[0]) - statistics.median(total[1])) * 1000
    paired = pct([a - b for a, b in zip(*total, strict=True)], 0.99) * 1000
    cpu = statistics.median(t[2] for t in ours) / statistics.median(t[2] for t in floor)
    return added, paired, len(ours), cpu


def measure(before_python: str, before_tree: Path, pairs: int, runs: int) -> str:
    load = os.getloadavg()
    per_run: list[dict[str, dict[str, tuple[float, float, int, float]]]] = []
    with tempfile.TemporaryDirectory() as shadow_dir:
        shadow = Path(shadow_dir)
        (shadow / "benchmarks").symlink_to(ROOT / "benchmarks")
        for _ in range(runs):
            pooled: dict[str, dict[str, dict[str, list[list[float]]]]] = {"before": {}, "after": {}}
            for side in ("before", "after", "after", "before"):
                got = _block(before_python, before_tree, pairs, shadow) if side == "before" else \
                    _block(sys.executable, None, pairs, shadow)
                for label, pair in got.items():
                    into = pooled[side].setdefault(label, {"ours": [], "floor": []})
                    into["ours"] += pair["ours"]
                    into["floor"] += pair["floor"]
            per_run.append({side: {_label(n, r): _figures(pooled[side], _label(n, r)) for n, r in JUDGED}
                            for side in pooled})
    rows = []
    for name, rtt in JUDGED:
        label = _label(name, rtt)
        target_ms, target_cpu = TARGETS[name]
        for what, index, target in (("added p50", 0, target_ms), ("CPU ratio", 3, target_cpu)):
            cells = [f"{name} {rtt} ms: {what}"]
            for side in ("before", "after"):
                values = [run[side][label][index] for run in per_run]
                fmt = "{:+.2f}" if index == 0 else "{:.2f}x"
                cells += [" / ".join(fmt.format(v) for v in values), fmt.format(statistics.median(values))]
                if index == 0:
                    p99 = [run[side][label][1] for run in per_run]
                    n = per_run[0][side][label][2]
                    cells[-1] += f" (paired p99 {statistics.median(p99):+.2f}, n={n})"
            rows.append([*cells, target])
    title = (f"item 4, before ({before_tree}) vs after ({ROOT}), {runs} run(s) of blocks B A A B, "
             f"{pairs} pairs per block at 0 ms ({max(20, pairs // 2)} at 25 ms); load before "
             f"{load[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    return table(title, ["metric", "before, per run", "before p50", "after, per run", "after p50", "target"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--before-tree", type=Path, required=True)
    parser.add_argument("--before-python", default=sys.executable)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    print(measure(args.before_python, args.before_tree.resolve(), args.pairs, args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
