"""What ``benchmarks.ray_scale`` measures per side: the rounds (wall time, first
tokens), the CPU each process spends (``/proc``), and the throughput those CPU costs
allow."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Awaitable, Callable

import trio

__all__ = ["PARTS", "Bulk", "Round", "Runner", "ideal", "parts", "total_cpu"]


class Round:
    """One measured round: per-agent first-token latencies and the wall time."""

    def __init__(self) -> None:
        self.first_token: list[float] = []
        self.wall = 0.0
        self.failed = 0


Runner = Callable[[int, int], Awaitable[Round]]


# -- CPU per process -------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """``(parent pid, CPU seconds)`` of a live process, from ``/proc`` (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def _descendants(root: int) -> dict[int, float]:
    """CPU seconds of every live process below ``root`` (Ray's daemons, its workers,
    the model server)."""
    stats = {
        int(name): stat for name in os.listdir("/proc") if name.isdigit() if (stat := _stat(int(name))) is not None
    }
    children: dict[int, list[int]] = {}
    for pid, (parent, _cpu) in stats.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, float] = {}
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        found[pid] = stats[pid][1]
        stack.extend(children.get(pid, ()))
    return found


PARTS = ("driver", "actors", "server", "ray")


def parts(server: int, actors: tuple[int, ...]) -> dict[tuple[str, int], float]:
    """CPU seconds so far of each process, by part: the driver (this process: its loop
    and, on the pool, Ray's threads in it), the actors, the model server, and everything
    else below this process (Ray's daemons and workers)."""
    found: dict[tuple[str, int], float] = {("driver", os.getpid()): time.process_time()}
    for pid, cpu in _descendants(os.getpid()).items():
        found["actors" if pid in actors else "server" if pid == server else "ray", pid] = cpu
    return found


class Bulk:
    """One side's throughput rounds, added up: wall time and each part's CPU seconds."""

    def __init__(self) -> None:
        self.agents, self.wall, self.failed = 0, 0.0, 0
        self.cpu = dict.fromkeys(PARTS, 0.0)

    async def round(
        self, run: Runner, parts: Callable[[], dict[tuple[str, int], float]], args: argparse.Namespace
    ) -> None:
        """``args.agents`` agents, ``args.concurrency`` at once; ``parts()``: CPU seconds
        used so far by each process (``parts``). A process that ends during the round
        (a closed pool's) counts for nothing, one that starts for all it used."""
        await trio.lowlevel.checkpoint()
        before = parts()
        bulk = await run(args.agents, args.concurrency)
        after = parts()
        self.agents += args.agents
        self.wall += bulk.wall
        self.failed += bulk.failed
        for (name, pid), cpu in after.items():
            self.cpu[name] += cpu - before.get((name, pid), 0.0)

    def row(self, latency: dict[str, float]) -> dict[str, float]:
        per_agent = {f"cpu_ms_{name}": 1000 * cpu / self.agents for name, cpu in self.cpu.items()}
        return {
            **latency,
            "agents_per_s": self.agents / self.wall if self.wall else float("nan"),
            # What the agents cost: the driver and the actors (not the model server, nor Ray's daemons).
            "cpu_ms_per_agent": per_agent["cpu_ms_driver"] + per_agent["cpu_ms_actors"],
            **per_agent,
            "wall_s": self.wall,
            "failed": latency["failed"] + self.failed,
        }


def total_cpu(row: dict[str, float]) -> float:
    return sum(row[f"cpu_ms_{name}"] for name in PARTS) / 1000


def ideal(row: dict[str, float], actors: int, cores: float) -> float:
    """The agents/s this machine allows at ``row``'s CPU per agent, idle: each process
    runs one event loop, so at most one core each (the one process's agents, each
    actor, the model server; the driver of the pool too), and all of them together at
    most ``cores``."""
    total = total_cpu(row)
    bounds = [cores / total if total > 0 else float("inf")]
    for name, processes in (("driver", 1), ("actors", max(actors, 1)), ("server", 1)):
        cpu = row[f"cpu_ms_{name}"] / 1000
        if cpu > 0:
            bounds.append(processes / cpu)
    return min(bounds)
