"""Layering inside ``_runtime`` (docs/architecture.md, "Inside the runtime"): a module
imports only modules ranked below it, at run time; only the package faces import
``_agent``. The runtime is grouped by concern (``_turns``, ``_model``, ``_calls``, and
the agent's own modules at the top); the ranks cut across the groups, so that a turn's
runner (``_turns``) may drive the model client (``_model``) and the tool dispatcher
(``_calls``), while the values both of those name (``_turns._turn``) rank below them.
``tests/test_layers.py`` checks the package's layers, type-only imports included; this
finer table leaves type-only imports out (a friend class named in an annotation)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trio_agent

RUNTIME_DIR = Path(trio_agent.__file__).resolve().parent / "_runtime"

RUNTIME_RANKS = {
    # leaves: counters, payload helpers, context I/O, the shared-warmup registry
    "_counters": 0, "_model._call_events": 0, "_turns._context_io": 0, "_model._prompt_cache": 0,
    "_model._request_text": 0, "_identity": 0, "_secrets": 0, "_turns._input": 0, "_calls._permissions": 0,
    "_construction": 0,  # NoPublicConstructor: the handles only the library makes
    "_turns._prompt_settings": 0,  # the settings a turn accepted now gets
    "_turns._phase": 0,  # the turn's lifecycle: phases and transitions
    "_calls._worker_state": 0,  # one worker as the worker tools keep it
    "_calls._tool_environment": 1,  # what the tools see of their agent
    "_observers": 0,  # the observer seam: how add-ons (tracing, a cassette) attach to an agent
    "_calls._blocking": 0,  # the warning when a tool blocks the event loop
    "_live_prefix": 0,  # exec's description listing the active MCP tools, as requests carry it
    "_model._response_feed": 1,  # an exchange's frames to events, with _call_events' payloads
    "_model._exchange": 1,  # the exchange interface: ResponseExchange and Route (types only)
    "_model._https_auth": 1,  # the headers of HTTPS requests, and a 401's recovery
    "_turns._turn": 1,  # turn handles and state
    "_calls._tool_runner": 1,
    "_model._bodies": 1,  # request bodies and their text, both dialects
    "_statistics": 2, "_turns._submission": 2,  # values of Agent.statistics() and submit()
    "_turns._idle_sleep": 2,  # an idle agent's sleep (Agent.sleep) and what ends it
    "_calls._nested_calls": 2,  # the tools.<name>(...) calls of exec cells
    "_calls._in_flight": 2,  # a model call's tool calls, started as their items stream
    "_calls._mcp_direct_calls": 2,  # top-level calls of direct MCP tools
    "_turns._reporter": 2, "_model._websocket_exchange": 2, "_model._https_exchange": 2,
    "_model._connections": 2, "_calls._sleep": 2, "_calls._workers": 2,
    "_model._attempt": 3,  # the attempt slot: one exchange per attempt, its send
    "_turns._queue": 3, "_calls._collaboration": 3,
    "_model._client": 4,
    "_model._sampling": 5, "_turns._pending_input": 5, "_calls._tool_dispatch": 5,
    "_model._compaction": 5,  # remote or local compaction: drives the sampler it is given
    "_hosting": 5,  # the hooks of an agent's owner (Workers, ThreadManager)
    "_turns._prompt_input": 6,  # what prompt/submit/start_if_idle take, checked
    "_turns._runner": 6,
    "_children": 7,  # an agent's Origin and the children it makes
    "_assembly": 8,  # the parts of one agent, wired (the composition root behind Agent)
    "_lifecycle": 8,  # the block of one agent: nursery, startup, shutdown
    "_agent": 9,  # the package face
}
FACES = {"__init__", "_agent"}
GROUPS = {"_turns", "_model", "_calls"}  # packages whose __init__ imports nothing


def module_name(path: Path) -> str:
    """``_turns/_turn.py`` -> ``_turns._turn``; a package's ``__init__`` is its name."""
    parts = list(path.relative_to(RUNTIME_DIR).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(source: str, module: str) -> list[tuple[str, bool]]:
    """``(runtime module, type_only)`` for every import of another ``_runtime`` module by
    ``module`` (a name relative to ``_runtime``, as ``module_name`` gives it)."""
    found: list[tuple[str, bool]] = []
    package = module.split(".")[:-1]  # the importer's package, relative to _runtime

    def named(parts: list[str]) -> str:
        """A module of the rank table: a group's module, or a top-level one."""
        return ".".join(parts[:2]) if parts[0] in GROUPS and len(parts) > 1 else parts[0]

    def visit(nodes: list[ast.stmt], type_only: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                visit(node.body, True)
                visit(node.orelse, type_only)
                continue
            for child in ast.walk(node):
                if not isinstance(child, ast.ImportFrom) or child.level == 0 or child.level - 1 > len(package):
                    continue  # absolute, or above _runtime
                base = package[: len(package) - (child.level - 1)]
                base += child.module.split(".") if child.module else []
                if not base or (len(base) == 1 and base[0] in GROUPS):
                    found.extend((named([*base, alias.name]), type_only) for alias in child.names)  # modules
                else:
                    found.append((named(base), type_only))

    visit(ast.parse(source).body, False)
    return [(name, type_only) for name, type_only in found if name in RUNTIME_RANKS or name in GROUPS]


def _modules() -> list[Path]:
    return sorted(RUNTIME_DIR.rglob("*.py"))


def test_runtime_ranks_cover_every_module() -> None:
    modules = {module_name(path) for path in _modules()} - {"__init__"} - GROUPS
    assert modules == set(RUNTIME_RANKS)


def test_the_groups_import_nothing() -> None:
    """A group's ``__init__`` is empty of imports, so importing one module of it loads
    only that module; its modules rank independently."""
    for group in GROUPS:
        tree = ast.parse((RUNTIME_DIR / group / "__init__.py").read_text(encoding="utf-8"))
        assert not [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)], group


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(RUNTIME_DIR)))
def test_runtime_modules_import_only_downward(path: Path) -> None:
    name = module_name(path)
    for target, type_only in runtime_imports(path.read_text(encoding="utf-8"), name):
        assert target not in GROUPS, f"{name} imports the group {target} itself; import its modules"
        if target == "_agent":
            assert name in FACES, f"{name} imports _agent; only the package faces may"
        if type_only or name == "__init__":
            continue
        assert RUNTIME_RANKS[target] < RUNTIME_RANKS[name], f"{name} imports {target} (not below it)"


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("from ._turn import Turn", "_turns._queue", [("_turns._turn", False)]),
        ("from .._model._client import ModelClient", "_turns._runner", [("_model._client", False)]),
        ("from .._model import _sampling", "_turns._runner", [("_model._sampling", False)]),
        ("from . import _pending_input", "_turns._runner", [("_turns._pending_input", False)]),
        ("if TYPE_CHECKING:\n    from ._agent import Agent\n", "_assembly", [("_agent", True)]),
        ("def f():\n    from ._turns._turn import M\n", "_assembly", [("_turns._turn", False)]),
        ("from .._session.ledger import TurnLedger", "_assembly", []),
        ("from ..._session.ledger import TurnLedger", "_turns._runner", []),
        ("from .._counters import TurnStats", "_turns._runner", [("_counters", False)]),
    ],
)
def test_runtime_import_detector(source: str, module: str, expected: list[tuple[str, bool]]) -> None:
    assert runtime_imports(source, module) == expected
