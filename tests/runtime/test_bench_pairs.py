"""The benchmarks' statistics: "added p99" is the p99 of paired differences, and the
interleaved variants rotate their order (no timing assertion: fixed numbers in, fixed
figures out)."""

from __future__ import annotations

import tomllib
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from benchmarks import _readme, first_token
from benchmarks._common import Timing, added_row, paired_differences
from benchmarks._rounds import interleave
from benchmarks.cold_cli import CODEX_CONFIG


def _timings(values: list[float]) -> list[Timing]:
    return [Timing(v, v, 0.0) for v in values]


def test_added_p99_is_the_p99_of_paired_differences_not_p99_minus_p99() -> None:
    # the two slow turns fall in different pairs: p99 minus p99 gives +0.00 (and the
    # old row printed that), the pairs say ours added up to 40 ms in one of them
    floor = [0.050, 0.010, 0.010, 0.010]
    ours = [0.011, 0.011, 0.011, 0.050]
    row = added_row("x", _timings(ours), _timings(floor))
    assert row[6] == "+40.00" and row[8] == "4"
    assert paired_differences([3.0, 1.0], [1.0, 2.0]) == [2.0, -1.0]


def test_unpaired_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in number"):
        added_row("x", _timings([1.0, 2.0]), _timings([1.0]))


async def test_interleaved_variants_take_every_position_and_follow_each_other_equally_often() -> None:
    calls: list[str] = []

    def client(name: str) -> Callable[[], Awaitable[Timing]]:
        async def turn() -> Timing:
            calls.append(name)
            return Timing(0.0, float(len(calls)), 0.0)
        return turn

    a, b, c = await interleave([client("a"), client("b"), client("c")], 6)
    assert [len(a), len(b), len(c)] == [6, 6, 6]
    rounds = [calls[i:i + 3] for i in range(0, 18, 3)]
    assert sorted("".join(r) for r in rounds) == ["abc", "acb", "bac", "bca", "cab", "cba"]  # every position
    assert [t.total for t in a] == [calls.index("a", i) + 1.0 for i in range(0, 18, 3)]  # sample i is round i's
    follows = Counter(zip(calls[-1:] + calls[:-1], calls, strict=True))  # back to back, cyclically
    assert sorted(follows) == [("a", "b"), ("a", "c"), ("b", "a"), ("b", "c"), ("c", "a"), ("c", "b")]
    assert set(follows.values()) == {3}  # never itself, each other client equally often
    calls.clear()
    assert [len(x) for x in await interleave([client("a"), client("b")], 2)] == [2, 2]
    assert calls == ["a", "b", "b", "a"]


def test_the_readme_table_is_generated_between_its_markers(tmp_path: Path) -> None:
    runs = [[["first token received, cold_connect", "3.00 ms", "2.00 ms (bare_socket)", "1.50x", "report"],
             ["warm | turn", "1 ms", "1 ms", "+0.00 ms", "-"]],
            [["first token received, cold_connect", "3.30 ms", "3.00 ms (bare_socket)", "1.10x", "report"]]]
    text = _readme.markdown(runs, "context line")
    lines = text.splitlines()
    assert lines[0] == "context line"
    assert lines[2].startswith("| metric | run 1: ") and lines[2].endswith("| target |")
    assert lines[4] == "| first token received, cold_connect | 1.50x (3.00 ms vs 2.00 ms (bare_socket)) | " \
                       "1.10x (3.30 ms vs 3.00 ms (bare_socket)) | report |"
    assert lines[5] == "| warm \\| turn | +0.00 ms (1 ms vs 1 ms) | - | - |"
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{_readme.BEGIN}\nold table\n{_readme.END}\nafter\n")
    _readme.replace_block(readme, text)
    assert readme.read_text() == f"intro\n{_readme.BEGIN}\n{text}\n{_readme.END}\nafter\n"
    readme.write_text("no markers\n")
    with pytest.raises(SystemExit, match="expected one"):
        _readme.replace_block(readme, text)


def test_the_project_readme_has_the_generated_block_once() -> None:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert text.count(_readme.BEGIN) == 1 and text.count(_readme.END) == 1


def test_first_token_is_in_the_summary_over_its_own_wire_floor() -> None:
    def row(path: str, p50: float, floor: str) -> dict[str, object]:
        return {"path": path, "floor": floor, "first_recv_p50_ms": p50, "first_recv_p99_ms": p50 * 2,
                "ratio_to_floor": p50 / 2.0, "runs": 10}

    rows = [row("bare_socket_floor", 2.0, "bare_socket_floor"), row("bare_https_floor", 2.0, "bare_https_floor"),
            row("cold_connect", 3.0, "bare_socket_floor"), row("https_store", 4.0, "bare_https_floor")]
    out = first_token.summary_rows(rows)
    # The metric names are the same in every run (the README table keys its rows by them);
    # the p99 and n go with the value.
    assert [r[0] for r in out] == ["first token received, cold_connect", "first token received, https_store"]
    assert out[1][1:4] == ["4.00 ms (p99 8.00 ms, n=10)", "2.00 ms (bare_https)", "2.00x"]


def test_the_codex_peer_runs_with_its_own_network_features_off() -> None:
    config = tomllib.loads(CODEX_CONFIG.format(base_url="http://127.0.0.1:1/v1"))
    assert config["check_for_update_on_startup"] is False
    assert config["analytics"]["enabled"] is False and config["feedback"]["enabled"] is False
    # codex's metrics exporter defaults to Statsig: every exporter is named "none"
    assert {config["otel"][k] for k in ("exporter", "trace_exporter", "metrics_exporter")} == {"none"}
    assert config["model_providers"][config["model_provider"]]["base_url"] == "http://127.0.0.1:1/v1"
