"""The in-process side of ``serve_load``'s warm-turn rows (issue 30, item 3): the same
turn as a served thread's, run by agents in one process, with every event consumed.

Run as a script (``python benchmarks/_inprocess_turns.py URL AGENTS WORKDIR``) in its
own process with ``PYTHONPATH`` naming the tree under test: it imports nothing of
``benchmarks``, so the tree's ``trio_agent`` is the one measured, and its CPU time is the
agents' alone (the model server is another process). It prints ``ready`` once its agents
are open and have run one untimed turn each; then, for each line ``ROUNDS`` read on
stdin, all agents run ``ROUNDS`` turns each, together, and it prints one JSON object:
``cpu`` (user + system seconds over those turns), ``wall``, ``turns``. It exits at EOF.
The parent alternates these blocks with the same blocks on servers (``_serve_warm``),
so both sides are measured over the same stretch of the shared machine's load.

The agents are configured as ``trio-agent serve`` configures a thread's agent on the
same endpoint: the built-in tools (with ``web__run``), a rollout under ``WORKDIR/home``
(the server keeps one per thread), the workspace ``WORKDIR/workspace``. A consumer task
per agent reads every event (``async for``), as the server's pump does.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import trio

import trio_agent as ta


class _Consumer:
    """Reads every event of ``agent``; ``terminal`` is set by each turn's terminal event."""

    def __init__(self, agent: ta.Agent) -> None:
        self.agent = agent
        self.events = 0
        self.terminal = trio.Event()

    async def run(self) -> None:
        async for event in self.agent.events:
            self.events += 1
            if event.kind.is_terminal:
                self.terminal.set()

    async def turn(self) -> None:
        self.terminal = trio.Event()
        turn = await self.agent.prompt("hello")
        await turn.result()  # raises unless it completed
        await self.terminal.wait()


async def _rounds(consumer: _Consumer, rounds: int) -> None:
    for _ in range(rounds):
        await consumer.turn()


async def measure(url: str, agents: int, work: Path) -> None:
    (work / "workspace").mkdir(parents=True, exist_ok=True)
    commands = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with trio.open_nursery() as nursery:
        consumers = []
        for _ in range(agents):  # a config each: each its own session id (and rollout)
            config = ta.AgentConfig(auth="bench-key", workspace=work / "workspace",
                                    responses=ta.Responses(websocket_url=url), tools=ta.Tools.default(),
                                    rollout=ta.RolloutConfig(work / "home"))
            agent = await nursery.start(_open, config)
            consumer = _Consumer(agent)
            nursery.start_soon(consumer.run)
            consumers.append(consumer)
        async with trio.open_nursery() as warmups:  # one untimed turn each (lazy imports, first request)
            for consumer in consumers:
                warmups.start_soon(consumer.turn)
        print("ready", flush=True)
        pending = b""
        while True:
            while b"\n" not in pending:
                chunk = await commands.receive_some()
                if not chunk:
                    nursery.cancel_scope.cancel()
                    return
                pending += chunk
            line, pending = pending.split(b"\n", 1)
            rounds = int(line)
            cpu, start = time.process_time(), time.perf_counter()
            async with trio.open_nursery() as turns:
                for consumer in consumers:
                    turns.start_soon(_rounds, consumer, rounds)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            print(json.dumps({"cpu": cpu, "wall": wall, "turns": float(agents * rounds)}), flush=True)


async def _open(config: ta.AgentConfig, *, task_status: trio.TaskStatus[ta.Agent] = trio.TASK_STATUS_IGNORED) -> None:
    """One agent, open until the nursery is cancelled."""
    async with ta.open_agent(config) as agent:
        task_status.started(agent)
        await trio.sleep_forever()


def main(argv: list[str]) -> int:
    url, agents, work = argv
    trio.run(measure, url, int(agents), Path(work))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
