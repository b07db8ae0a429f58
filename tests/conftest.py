from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import settings

import trio_agent as ta
from trio_agent._event_payloads._check import payload_problems
from trio_agent._events import EventSink
from trio_agent.testing import EventLog as EventLog  # the public helpers; tests import them from here
from trio_agent.testing import FakeConnection, FakeResponsesServer
from trio_agent.testing import scripted as scripted

pytest_plugins = ("pytester",)  # tests/replay/test_pytest_plugin.py runs pytest on the cassette plugin

# The suite never signs in with the developer's own Codex login (~/.codex/auth.json):
# `trio-agent run` without OPENAI_API_KEY would use it. Tests of logins pass their own.
os.environ["CODEX_HOME"] = str(Path(__file__).parent / "fixtures" / "no-codex-home")
# The suite's fake servers listen on loopback and speak OpenAI's dialect (SPEC, the seeds):
# its `trio-agent run`s and servers say so, as its configs do (ta.Profile.OPENAI) -- a
# loopback endpoint would otherwise get Profile.GENERIC. tests/servers, which talk to
# third-party servers, take this variable away again.
os.environ["TRIO_AGENT_PROFILE"] = "openai"
# Nor does it send runs to a warm daemon the developer runs (tests/daemon start their own).
os.environ["TRIO_AGENT_NO_DAEMON"] = "1"
# Nor keep the sessions of its `trio-agent run`s in the developer's ~/.trio-agent (tests of
# sessions give each command a home of its own).
os.environ["TRIO_AGENT_HOME"] = tempfile.mkdtemp(prefix="trio-agent-test-home-")
atexit.register(shutil.rmtree, os.environ["TRIO_AGENT_HOME"], ignore_errors=True)
# This test run's name for what its tests plant under the host's /run (the sandbox tests'
# service sockets and directories: tests/acceptance/test_sandbox_escapes.run_plant). Set by
# the process that owns the run (xdist's controller, or the only process); its workers
# inherit it. The owner removes the plants at its end (pytest_unconfigure), after every
# worker has finished: every sandboxed command walks /run and binds over the sockets it
# finds, and one removed between that walk and its bwrap fails the command.
RUN_PLANTS = "TRIO_AGENT_TEST_RUN_PLANTS"
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ[RUN_PLANTS] = f"run{os.getpid()}"

# The suite runs derandomized by default (the same examples every run, so CI and the
# README command cannot flake) and without per-example deadlines. Explore new examples
# locally with HYPOTHESIS_PROFILE=explore.
settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_unconfigure(config: pytest.Config) -> None:
    """The owner of the run removes its plants under /run (see RUN_PLANTS) once no
    worker of it runs a command any more."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    for path in Path("/run").glob(f"trio-agent-test-*-{os.environ[RUN_PLANTS]}-*"):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def pytest_configure(config: pytest.Config) -> None:
    """Run as a background job of a non-interactive shell (``cmd &``), or under
    ``nohup``, pytest starts with SIGINT and SIGQUIT ignored, and every process a test
    spawns inherits that: a CLI under test then rightly keeps ignoring the Ctrl-C the
    test sends (as ``trio-agent`` does when its user started it so), and the Ctrl-C
    tests hang. The suite restores the defaults a terminal gives, so it behaves the same
    however it is launched."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def signal_dispositions() -> Iterator[None]:
    """A test leaves SIGINT and SIGTERM as it found them: the CLI's in-process paths may
    set them to ``SIG_IGN`` (``Interrupts.settle``), and an ignored signal is inherited by
    every process the worker spawns later -- whose Ctrl-C tests then hang. Restored, and
    the test that changed them fails, named."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = [signal.Signals(signum).name for signum, handler in before.items() if signal.getsignal(signum) != handler]
    for signum, handler in before.items():
        signal.signal(signum, handler)
    assert not changed, f"the test left {changed} with another disposition (restored)"


@pytest.fixture(autouse=True)
def payload_audit(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every event any test emits is checked against its ``TypedDict`` (docs/events.md);
    a mismatch fails that test at teardown, naming the kind, the field and the value.
    (The list it yields holds the problems found so far.)"""
    problems: list[str] = []
    emit = EventSink.emit

    def checked(self: EventSink, kind: ta.EventKind, payload: dict[str, Any], turn_id: int | None = None) -> Any:
        problems.extend(p for p in payload_problems(kind, payload) if p not in problems)
        return emit(self, kind, payload, turn_id)

    monkeypatch.setattr(EventSink, "emit", checked)
    yield problems
    if problems:
        shown = "\n  ".join(problems[:20])
        pytest.fail(f"{len(problems)} event payload(s) do not match their declaration:\n  {shown}", pytrace=False)


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeResponsesServer:
    fake = FakeResponsesServer()
    await nursery.start(fake.serve)
    return fake


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def make_config(server: FakeResponsesServer, workspace: Path, **kw: Any) -> ta.AgentConfig:
    responses = kw.pop("responses", None) or ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url)
    kw.setdefault("thinking", ta.Thinking.LOW)
    kw.setdefault("session_id", "model-test")
    return ta.AgentConfig(auth="test-key", workspace=workspace, responses=responses, **kw)


async def run_model(
    server: FakeResponsesServer, workspace: Path, instruction: str, **kw: Any
) -> str:
    """The reference ``run_model``: one prompt, every event as JSONL, turn must succeed."""
    out = io.StringIO()
    async with trio.open_nursery() as nursery, ta.open_agent(make_config(server, workspace, **kw)) as agent:
        nursery.start_soon(ta.write_jsonl, agent.events, out)
        turn = await agent.prompt(instruction)
        await turn.result()
    return out.getvalue()


def events_of(output: str, kind: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in output.splitlines()]
    return [line["payload"] for line in lines if line["type"] == kind]


def assert_warmup(warmup: dict[str, Any]) -> None:
    """The reference ``assert_warmup``."""
    assert warmup["type"] == "response.create"
    assert warmup["store"] is True
    assert warmup["generate"] is False
    assert warmup["stream"] is True
    assert warmup["parallel_tool_calls"] is False
    assert warmup["prompt_cache_key"] == "model-test"
    assert len(warmup["input"]) == 2
    tools_item = warmup["input"][0]
    assert tools_item["type"] == "additional_tools"
    assert "id" not in tools_item
    assert tools_item["role"] == "developer"
    assert tools_item["tools"][0]["type"] == "custom"
    assert tools_item["tools"][0]["name"] == "exec"
    assert "`web__run`" in tools_item["tools"][0]["description"]
    assert tools_item["tools"][1]["type"] == "function"
    assert tools_item["tools"][1]["name"] == "wait"
    assert warmup["input"][1]["role"] == "developer"
    for absent in ("tools", "instructions", "context_management"):
        assert absent not in warmup
    assert "mode" not in warmup["reasoning"]
    assert warmup["client_metadata"]["ws_request_header_x_openai_internal_codex_responses_lite"] == "true"


async def warm(server: FakeResponsesServer) -> FakeConnection:
    """Accept the agent's socket, check its startup warmup (``assert_warmup``) and answer it."""
    conn = await server.accept()
    assert_warmup(await conn.next_request())
    await conn.send_warmup("resp-warmup")
    return conn


# -- the in-memory seam (FakeResponsesServer.in_memory + Responses(dialer=...)) ----------


@pytest.fixture
async def memory_server(nursery: trio.Nursery) -> FakeResponsesServer:
    """A fake server reached only through its in-memory ``dial`` (no socket, no listener)."""
    fake = FakeResponsesServer.in_memory()
    await nursery.start(fake.serve)
    return fake


def memory_config(server: FakeResponsesServer, workspace: Path, **kw: Any) -> ta.AgentConfig:
    """``make_config`` for an in-memory server: the WebSocket dials through ``server.dial``.
    (HTTPS tests pass ``responses=`` with ``http_client=server.http_client()``.)"""
    responses = kw.pop("responses", None) or ta.Responses(profile=ta.Profile.OPENAI,
                                                          websocket_url=server.url, dialer=server.dial)
    return make_config(server, workspace, responses=responses, **kw)
