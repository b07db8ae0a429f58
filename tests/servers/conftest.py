"""Acceptance tests through real third-party Responses servers (issue 25, item 5): not
collected unless every server is installed at its pinned version -- ``bash .ci/servers``
installs them; ``.ci/run`` runs ``pytest tests/servers`` as a step of its own, where
collecting nothing fails.

One chat backend and one process of each server per test session (per xdist worker):
they are slow to start, and tests in a session run one at a time, each with its own
backend script."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._chat_backend import ChatBackend
from ._servers import Server, missing, start_codex_bridge, start_litellm

if missing():  # bash .ci/servers
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def chat_backend() -> Iterator[ChatBackend]:
    backend = ChatBackend()
    backend.start()
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture
def backend(chat_backend: ChatBackend) -> ChatBackend:
    """The session's backend with an empty script (a test sets its own)."""
    chat_backend.script()
    return chat_backend


def _serve(start: Callable[[str, Path], Server], backend: ChatBackend, workdir: Path) -> Iterator[Server]:
    server = start(backend.url, workdir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def litellm(chat_backend: ChatBackend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _serve(start_litellm, chat_backend, tmp_path_factory.mktemp("litellm"))


@pytest.fixture(scope="session")
def codex_bridge(chat_backend: ChatBackend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _serve(start_codex_bridge, chat_backend, tmp_path_factory.mktemp("codex-bridge"))


@pytest.fixture(params=["litellm", "codex_bridge"])
def responses_server(request: pytest.FixtureRequest) -> Server:
    """Each server in turn (a test that holds for every one of them)."""
    server: Server = request.getfixturevalue(request.param)
    return server
