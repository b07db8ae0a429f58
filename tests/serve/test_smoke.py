from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from ._harness import app_server, run_turn, start_thread


async def test_one_turn(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread = await start_thread(client)
        completed = await run_turn(client, thread["id"], "say done")
        assert completed["turn"]["status"] == "completed"
        print(completed)
