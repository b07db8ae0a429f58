"""Fixtures the tool tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from trio_agent._tools.exec_command import ShellSessions


@pytest.fixture
async def shell(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[ShellSessions]:
    """Shell sessions in ``tmp_path``, unconfined; closed (every process reaped) at teardown.
    (test_sandbox and test_exec_command_secrets define their own.)"""
    sessions = ShellSessions(nursery, tmp_path)
    try:
        yield sessions
    finally:
        await sessions.aclose()
