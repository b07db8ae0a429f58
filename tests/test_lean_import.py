"""What a cold start imports (issue 13 item 4): ``import trio_agent`` and a whole
``trio-agent run --local`` leave the optional and heavy modules alone.

Module sets, not timings: each case runs in a fresh interpreter and prints the
modules it ended up with. ``benchmarks/cold_cli.py`` measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio

import trio_agent
from trio_agent.testing import FakeResponsesServer

TREE = str(Path(trio_agent.__file__).resolve().parent.parent)  # this tree's package, whatever the cwd

# Never loaded by either: third-party extras, the test kit and what it pulls in, the
# app server, record/replay, OpenTelemetry export.
NEVER = (
    "httpx", "jsonschema", "mcp", "pydantic", "annotated_types", "opentelemetry", "ray", "quickjs", "pytest",
    "trio.testing",
    "trio_agent.testing", "trio_agent._serve", "trio_agent._cassette", "trio_agent.cli._bench",
    "trio_agent._tracing._otlp", "trio_agent.ray",
)
# Loaded only by the first tool call that needs them (the worker tools: by an agent
# that runs workers, ``Tools.with_collaboration``; the typed-tool machinery, the
# blocking watch and the thread runner: by the first user tool; what the sandbox's
# command line needs beyond the trial -- the rebuilt /run's descriptors, the options
# ``bwrap --help`` listed -- by the first sandboxed command).
PER_CALL = ("trio_agent._tools._sandbox_fds", "trio_agent._tools._beneath",
            "trio_agent._tools._policy", "trio_agent._tools._patch_parse", "trio_agent._tools._shell_env",
            "trio_agent._tools._shell_session",
            "trio_agent._tools.exec_command", "trio_agent._tools.apply_patch", "trio_agent._tools.code_mode",
            "trio_agent._runtime._calls._workers", "trio_agent._runtime._calls._worker_state",
            "trio_agent._tools._threaded", "trio_agent._runtime._calls._blocking", "trio_agent._tools._schema",
            "trio_agent._tools._schema_types", "trio_agent._tools._schema_pydantic", "trio_agent._tools._strict")
# Loaded when the agent connects, not by ``import trio_agent``.
TRANSPORT = ("trio_websocket", "wsproto", "h11", "trio_agent._transport.websocket", "trio_agent._local_model")
# Loaded by the first read of one of their public names (``trio_agent.__getattr__``):
# nothing an agent opens or runs needs the thread manager, durable rollouts or the
# payload declarations (``_event_payloads._shared``, the JSON type, is all it uses);
# MCP server configuration waits for the first ``McpServer`` (``Tools.with_mcp``), and
# tracing's settings and sink for the first ``Tracing``, snapshots for the first
# snapshot (``TurnResult.snapshot()``, ``SessionSnapshot.from_json``), the values of
# ``Agent.statistics()``, ``submit()``, ``start_if_idle()`` and ``sleep()`` for their first call, and
# ``ToolContext`` for the first user tool (the built-ins never take one), the approval
# request's classes for the first approval request or patch, ``OutputSchema`` for the
# first turn with structured output.
ON_FIRST_READ = ("trio_agent._threads", "trio_agent._rollout", "trio_agent._tools._mcp_config",
                 "trio_agent._tracing._settings", "trio_agent._session.snapshot",
                 "trio_agent._runtime._statistics", "trio_agent._runtime._turns._submission",
                 "trio_agent._runtime._turns._idle_sleep",
                 "trio_agent._tools._context",
                 "trio_agent._base.approval_request", "trio_agent._wire.output_schema",
                 "trio_agent._event_payloads._catalog",
                 "trio_agent._event_payloads._access", "trio_agent._event_payloads._approval",
                 "trio_agent._event_payloads._model", "trio_agent._event_payloads._run",
                 "trio_agent._event_payloads._tool")

REPORT = "import json, sys\nprint(json.dumps([sys.modules['trio_agent'].__file__, sorted(sys.modules)]))\n"


def _with_modules(*names: str) -> set[str]:
    """``names``, each a package whose ``__init__`` imports all of its modules with them."""
    return {f"{name}.{path.stem}" if path.stem != "__init__" else name for name in names
            for path in Path(TREE, *name.split(".")).glob("*.py")}


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == name or m.startswith(name + ".") for name in names))


def _modules_after(code: str, cwd: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([TREE, os.environ.get("PYTHONPATH", "")])}
    env.pop("OPENAI_API_KEY", None)
    result = subprocess.run([sys.executable, "-c", code + REPORT], capture_output=True, text=True, cwd=cwd,
                            env=env, check=True, timeout=120)
    package, modules = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(package).resolve() == Path(TREE) / "trio_agent" / "__init__.py"  # this tree's, not another checkout's
    assert isinstance(modules, list)
    return modules


def test_import_trio_agent_loads_no_optional_module(tmp_path: Path) -> None:
    modules = _modules_after("import trio_agent\n", tmp_path)
    assert "trio_agent" in modules
    assert _loaded(modules, NEVER) == []
    assert _loaded(modules, PER_CALL) == []
    assert _loaded(modules, TRANSPORT) == []
    assert _loaded(modules, ON_FIRST_READ) == []


def test_a_lazy_name_loads_its_module_on_first_read(tmp_path: Path) -> None:
    code = "import trio_agent\nassert trio_agent.ThreadManager.__module__ == 'trio_agent'\n"
    modules = _modules_after(code, tmp_path)
    assert "trio_agent._threads" in modules
    assert _loaded(modules, ("trio_agent._event_payloads._catalog",)) == []
    modules = _modules_after("from trio_agent import EVENT_PAYLOADS, RolloutConfig\n", tmp_path)
    # a rollout's configuration alone: not the resume path (DurableSession, snapshots)
    untouched = {"trio_agent._threads", "trio_agent._tools._mcp_config", "trio_agent._tracing._settings",
                 "trio_agent._runtime._statistics", "trio_agent._runtime._turns._submission",
                 "trio_agent._runtime._turns._idle_sleep",
                 "trio_agent._tools._context", "trio_agent._base.approval_request",
                 "trio_agent._wire.output_schema", "trio_agent._session.snapshot"}
    loaded = set(ON_FIRST_READ) - untouched | _with_modules("trio_agent._rollout") - {"trio_agent._rollout._durable"}
    assert _loaded(modules, ON_FIRST_READ) == sorted(loaded)
    code = ("import trio_agent, attrs\nfrom trio_agent._session.snapshot import SessionSnapshot\n"
            "assert attrs.fields(trio_agent.DurableSession).snapshot.type is SessionSnapshot\n")
    assert "trio_agent._rollout._durable" in _modules_after(code, tmp_path)


def test_a_lazy_name_whose_module_fails_says_so(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['trio_agent._threads'] = None  # what a failed import leaves\n"
        "import trio_agent\n"
        "try:\n"
        "    trio_agent.ThreadManager\n"
        "except ImportError as exc:\n"
        "    assert 'trio_agent.ThreadManager could not be loaded' in str(exc), exc\n"
        "    assert exc.name == 'trio_agent._threads' and exc.__cause__ is not None\n"
        "else:\n"
        "    raise AssertionError('no ImportError')\n"
        "assert not hasattr(trio_agent, 'NoSuchName')\n"
    )
    _modules_after(code, tmp_path)


@pytest.mark.parametrize("keeps", [False, True])
def test_run_local_loads_neither_the_test_kit_nor_the_tools_it_did_not_call(tmp_path: Path, keeps: bool) -> None:
    # A run keeps its session (a rollout) unless --ephemeral: only then the rollout
    # modules -- not the resume path's (DurableSession, the snapshots' module).
    options = "" if keeps else "'--ephemeral', "
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['trio-agent', 'run', '--local', {options}'hello']\n"
        "try:\n"
        "    runpy.run_module('trio_agent', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
    )
    modules = _modules_after(code, tmp_path)
    assert "trio_agent._local_model" in modules and "trio_agent.cli._run" in modules  # it did run
    assert _loaded(modules, NEVER) == []
    assert _loaded(modules, PER_CALL) == []
    kept = sorted(_with_modules("trio_agent._rollout") - {"trio_agent._rollout._durable"}) if keeps else []
    assert _loaded(modules, ON_FIRST_READ) == kept


def test_internal_records_are_not_attrs_classes() -> None:
    # each attrs class costs about half a millisecond to build at import (trio_agent._record)
    from trio_agent._runtime._calls._tool_runner import ToolOutcome
    from trio_agent._runtime._counters import TurnStats
    from trio_agent._runtime._turns._turn import TurnState
    from trio_agent._session.conversation import Chain, ConversationSnapshot
    from trio_agent._session.ledger import Committed, Rewritten
    from trio_agent._session.planner import FinishTurn, RunTools, SampleAgain
    from trio_agent._tools._sandbox import Confinement, Resolution
    from trio_agent.cli._run import _State

    records = (TurnStats, ToolOutcome, TurnState, Chain, ConversationSnapshot, Committed, Rewritten, FinishTurn,
               RunTools, SampleAgain, Confinement, Resolution, _State)
    assert [cls.__name__ for cls in records if attrs.has(cls)] == []


def test_a_record_compares_hashes_and_shows_its_fields() -> None:
    from trio_agent._session.conversation import Chain
    from trio_agent._session.planner import FinishTurn

    assert Chain("resp-1", 2) == Chain("resp-1", 2) and Chain() == Chain(None, 0)
    assert Chain("resp-1", 2) != Chain("resp-1", 3) and Chain() != FinishTurn("")
    assert hash(Chain("resp-1", 2)) == hash(Chain("resp-1", 2))
    assert repr(Chain("resp-1", 2)) == "Chain(previous_response_id='resp-1', delta_start=2)"
    match FinishTurn("done"):
        case FinishTurn(message):
            assert message == "done"


def test_the_https_transport_does_not_load_the_websocket_one(tmp_path: Path) -> None:
    modules = _modules_after("import trio_agent._transport.https\n", tmp_path)
    assert "httpx" in modules
    assert _loaded(modules, ("trio_websocket", "wsproto", "trio_agent._transport.websocket")) == []


def test_cattrs_waits_for_a_snapshot_to_read(tmp_path: Path) -> None:
    # frames are read by hand (trio_agent._wire.frames); the converter is built for
    # SessionSnapshot.from_json alone
    run = ("import runpy, sys\nsys.argv = ['trio-agent', 'run', '--local', 'hello']\ntry:\n"
           "    runpy.run_module('trio_agent', run_name='__main__')\nexcept SystemExit as exc:\n"
           "    assert exc.code == 0, exc.code\n")
    for code in ("import trio_agent\n", run):
        assert _loaded(_modules_after(code, tmp_path), ("cattrs", "trio_agent._json")) == []
    load = ("from trio_agent import SessionSnapshot\ntry:\n    SessionSnapshot.from_json('{}')\n"
            "except ValueError:\n    pass\n")
    assert "cattrs" in _modules_after(load, tmp_path)


# The cold CLI against a server (issue 30 item 1): each transport loads its own client
# library only, and nothing a first request does not need.
WEBSOCKET_ONLY = ("trio_websocket", "wsproto", "trio_agent._transport.websocket")
HTTPS_ONLY = ("httpx", "httpcore", "anyio", "certifi", "trio_agent._transport.https",
              "trio_agent._runtime._model._https_exchange")
HTTPX_CLI = ("httpx._main", "click", "pygments", "rich")  # what httpx's own command line imports
# the other commands' modules (their parsers and entry points), and what run's options
# import only when given (shlex: --mcp-stdio)
OTHER_COMMANDS = ("trio_agent.cli._app_server", "trio_agent.cli._mcp_login", "trio_agent.cli._resume",
                  "trio_agent.cli._serve_options", "shlex")


def test_httpx_is_imported_without_its_command_line(tmp_path: Path) -> None:
    # pytest brings pygments (and the mcp extra click): httpx's __init__ would import both
    lean = "from trio_agent._transport._httpx_lean import import_httpx\nimport_httpx()\n"
    check = "import sys, httpx\nassert callable(httpx.main) and 'httpx._main' not in sys.modules\n"
    modules = _modules_after(lean + check, tmp_path)
    assert "httpx" in modules
    assert _loaded(modules, HTTPX_CLI) == []
    # imported first by someone else, httpx is left as it was (its command line tried)
    assert "pygments" in _modules_after("import httpx\n" + lean, tmp_path)


METADATA = ("importlib.metadata", "email", "zipfile")  # what trio-websocket's version check would import


def test_trio_websocket_is_imported_without_importlib_metadata(tmp_path: Path) -> None:
    # trio-websocket asks importlib.metadata for trio's version at import (_websocket_lean)
    lean = "import trio_agent._transport.websocket\n"
    assert _loaded(_modules_after(lean, tmp_path), METADATA) == []
    # the stand-in is gone after the import: importlib.metadata is the real one
    real = ("import importlib.metadata, trio, trio_websocket\n"
            "assert importlib.metadata.version('trio') == trio.__version__\n"
            "assert importlib.metadata.version('trio-websocket') and importlib.metadata.distributions\n"
            "assert not trio_websocket._impl._IS_TRIO_MULTI_ERROR\n")
    assert "importlib.metadata" in _modules_after(lean + real, tmp_path)
    # imported first by someone else, importlib.metadata is the one trio-websocket uses
    first = "import importlib.metadata as m\nimport trio_agent._transport.websocket as w\n"
    _modules_after(first + "assert w.trio_websocket._impl.version is m.version\n", tmp_path)


def test_importlib_metadata_works_for_others_while_trio_websocket_is_imported(tmp_path: Path) -> None:
    # another thread's import of importlib.metadata during that import gets the stand-in:
    # every name of the real module answers (here: asked right when trio-websocket's
    # _impl imports wsproto, after it took ``version`` from the stand-in)
    code = (
        "import sys\n"
        "seen = []\n"
        "class Probe:\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'wsproto' and not seen:\n"
        "            stand_in = sys.modules['importlib.metadata']\n"
        "            from importlib.metadata import PackageNotFoundError, entry_points, version\n"
        "            seen.append((stand_in, entry_points, PackageNotFoundError, version('trio-websocket')))\n"
        "        return None\n"
        "sys.meta_path.insert(0, Probe())\n"
        "import trio_agent._transport.websocket\n"
        "import importlib.metadata as real\n"
        "stand_in, entry_points, not_found, version = seen[0]\n"
        "assert stand_in is not real and entry_points is real.entry_points and not_found is real.PackageNotFoundError\n"
        "assert version == real.version('trio-websocket')\n"
    )
    _modules_after(code, tmp_path)


@pytest.mark.parametrize("transport", ["websocket", "https"])
async def test_the_cold_cli_loads_only_its_transport(
    server: FakeResponsesServer, tmp_path: Path, transport: str
) -> None:
    flags = (["--websocket-url", server.url] if transport == "websocket"
             else ["--api-base", server.http_base_url, "--transport", "https"])
    argv = ["trio-agent", "run", "--profile", "openai", "--ephemeral", *flags, "hello"]
    code = ("import runpy, sys\n"
            f"sys.argv = {argv!r}\n"
            "try:\n"
            "    runpy.run_module('trio_agent', run_name='__main__')\n"
            "except SystemExit as exc:\n"
            "    assert exc.code == 0, exc.code\n")

    async def model() -> None:
        if transport == "https":
            await (await server.accept_http()).send_final("resp-1", "hi")
        else:
            conn = await server.accept()
            assert (await conn.next_request()).get("generate") is not False  # the prompt: no warmup
            await conn.send_final("resp-1", "hi")

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([TREE, os.environ.get("PYTHONPATH", "")]),
           "OPENAI_API_KEY": "sk-lean", "TRIO_AGENT_NO_DAEMON": "1"}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model)
        with trio.fail_after(60):
            done = await trio.run_process([sys.executable, "-c", code + REPORT], cwd=tmp_path, env=env,
                                          capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    modules: list[str] = json.loads(done.stdout.decode().strip().splitlines()[-1])[1]
    assert "trio_agent.cli._run" in modules  # it did run
    assert _loaded(modules, HTTPS_ONLY if transport == "websocket" else WEBSOCKET_ONLY) == []
    assert _loaded(modules, tuple(name for name in NEVER if name != "httpx")) == [], modules
    assert _loaded(modules, PER_CALL) == []
    assert _loaded(modules, ("cattrs", "trio_agent._json", "trio_agent._local_model")) == []
    assert _loaded(modules, HTTPX_CLI) == []  # httpx without its command line (_transport._httpx_lean)
    assert _loaded(modules, OTHER_COMMANDS) == []  # run's parser alone (cli/_main._parsers(run_only=True))
    if transport == "websocket":  # trio-websocket without importlib.metadata (_transport._websocket_lean)
        assert _loaded(modules, METADATA) == []
    # an ephemeral run: no rollout, no snapshot
    assert _loaded(modules, ON_FIRST_READ) == []
