"""Ray tests: one local Ray cluster per test session (2 CPUs), and the scripted model
server in the driver (``_model.py``). Not collected without Ray (the [ray] extra)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from trio_agent.testing import FakeResponsesServer

from ._model import serve_model

try:
    import ray
except ModuleNotFoundError:  # pip install -e '.[test,ray]' to run them
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A local cluster for the session. Its workers start in this directory, so they
    import the same trio_agent (and these test modules) as the driver. ``address="local"``:
    always a new cluster of its own, never one that ``ray start`` left running here.

    Nothing leaves the machine: the model server listens on 127.0.0.1, and Ray names
    its node by the host's own address (it resolves 127.0.0.1 to that on purpose),
    which Linux routes through the loopback device."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry attempts
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
async def model(nursery: trio.Nursery) -> FakeResponsesServer:
    server: FakeResponsesServer = await nursery.start(serve_model)
    return server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path
