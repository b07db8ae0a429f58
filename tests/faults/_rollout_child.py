"""Child processes for the rollout durability tests (``test_rollout_durability``).

Run as ``python -m tests.faults._rollout_child MODE ...`` from the repository root:

``agent API_BASE HOME WORKSPACE THREAD [torn]``
    An agent on the HTTPS transport (full replay, so every request shows the whole
    committed history) against the parent's ``FakeResponsesServer``. It runs the turn
    "first prompt", then "second prompt", whose model answer calls ``note`` (answered)
    and then ``block`` (never returns). Once ``block`` runs, every item of the turn so
    far is committed; with ``torn`` the child then appends the first part of a genuine
    rollout line through its own descriptor (a write cut short, staged on purpose).
    Then it prints ``COMMITTED`` and waits to be killed.

``efbig HOME THREAD``
    No agent: a rollout writer under a file size limit (``RLIMIT_FSIZE``, ``SIGXFSZ``
    ignored), so the kernel really cuts a write short and fails the next one
    (``EFBIG``). Prints one JSON object describing what happened.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

import trio

import trio_agent as ta
from trio_agent._jsontext import dumps
from trio_agent._rollout import RolloutWriter
from trio_agent._runtime._identity import Rollout
from trio_agent._session.history import History
from trio_agent._session.ledger import Committed

COMMITTED = "COMMITTED"
TORN_TEXT = "never committed: café"  # the fragment ends inside the two bytes of "é"


def torn_fragment() -> bytes:
    """The start of a rollout line as the writer makes it (a fixed timestamp)."""
    line = {"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item", "payload": ta_message(TORN_TEXT)}
    data = (dumps(line) + "\n").encode("utf-8")
    return data[: data.index("é".encode()) + 1]


def ta_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def agent_config(api_base: str, home: str, workspace: str, thread: str, tools: ta.Tools) -> ta.AgentConfig:
    responses = ta.Responses(
        profile=ta.Profile.OPENAI,
        transport=ta.Transport.HTTPS, store=False, history=ta.History.FULL_REPLAY, api_base_url=api_base,
    )
    return ta.AgentConfig(
        auth="test-key", workspace=Path(workspace), responses=responses, session_id=thread,
        thinking=ta.Thinking.LOW, rollout=ta.RolloutConfig(home), tools=tools,
    )


def blocking_tools(blocked: trio.Event) -> ta.Tools:
    async def note(ctx: ta.ToolContext, args: Any) -> str:
        return "noted"

    async def block(ctx: ta.ToolContext, args: Any) -> str:
        blocked.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    schema = {"type": "object", "properties": {}}
    return ta.Tools(builtins=False).function("note", "Take a note.", schema, note).function(
        "block", "Never returns.", schema, block
    )


async def run_agent(api_base: str, home: str, workspace: str, thread: str, torn: bool) -> None:
    blocked = trio.Event()
    config = agent_config(api_base, home, workspace, thread, blocking_tools(blocked))
    async with ta.open_agent(config) as agent:
        await (await agent.prompt("first prompt")).result()
        await agent.prompt("second prompt")
        await blocked.wait()
        if torn:
            assert agent.rollout is not None
            fd = os.open(agent.rollout.path, os.O_WRONLY | os.O_APPEND)
            os.write(fd, torn_fragment())
        print(COMMITTED, flush=True)
        await trio.sleep_forever()


def run_efbig(home: str, thread: str) -> None:
    meta = {"session_id": thread, "id": thread, "cwd": home, "model": "test"}
    rollout = Rollout(RolloutWriter.open(ta.RolloutConfig(home), thread, meta, History()))
    small, big, bigger = ta_message("small"), ta_message("x" * 20_000), ta_message("y" * 20_000)
    history = History([small])
    rollout.on_ledger(Committed((small,), history))
    whole = rollout.path.stat().st_size
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (whole + 4096, hard))
    history = history.append(big)
    rollout.on_ledger(Committed((big,), history))  # cut short at the limit, then EFBIG
    after_failure = rollout.path.stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    rollout.flush()  # writes the history the failure left behind, then fsyncs
    recovered = rollout.path.stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (recovered + 4096, hard))
    rollout.on_ledger(Committed((bigger,), history.append(bigger)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rollout.close()  # the recovery write fails again: a warning, the file stays whole
    print(json.dumps({
        "whole": whole, "after_failure": after_failure, "recovered": recovered,
        "final": rollout.path.stat().st_size, "path": str(rollout.path),
        "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
    }))


def main(argv: list[str]) -> None:
    mode, *args = argv
    if mode == "agent":
        api_base, home, workspace, thread, *flags = args
        trio.run(run_agent, api_base, home, workspace, thread, flags == ["torn"])
    elif mode == "efbig":
        run_efbig(*args)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
