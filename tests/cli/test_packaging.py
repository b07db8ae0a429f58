"""Every third-party module the package imports is declared in pyproject.toml (issue 24).

The import statements of ``trio_agent/**.py`` and the launcher are read from their
syntax trees (nothing is imported): each absolute import of a module outside the
standard library (``sys.stdlib_module_names``) is mapped to the distribution whose
files hold it (``importlib.metadata``; a module not installed here counts as the
distribution of its own name), and that distribution must be a dependency or in an
extra other than ``test``. An extra's module may be imported at module level only by
the package that needs the extra (:data:`EXTRA_HOMES`); everywhere else it is imported
lazily, inside a function or under ``TYPE_CHECKING``, so the core install never
imports it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from ._cli import ROOT

SOURCES = [*sorted((ROOT / "trio_agent").rglob("*.py")), ROOT / "_trio_agent_launch.py"]
OURS = ("trio_agent", "_trio_agent_launch")
# Where an extra's modules may be imported at the top of a module: the package of that extra.
EXTRA_HOMES = {"otel": ("trio_agent._tracing",), "ray": ("trio_agent.ray",)}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0]).lower()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {extra: {_name(r) for r in reqs} for extra, reqs in project["optional-dependencies"].items()}
    return {_name(r) for r in project["dependencies"]}, extras


@cache
def _owners() -> dict[str, str]:
    """Installed file (resolved) -> the distribution that installed it."""
    owners = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            if file.suffix in (".py", ".so", ".pyd"):
                owners[str(Path(str(dist.locate_file(file))).resolve())] = _name(dist.metadata["Name"])
    return owners


def _distribution(module: str) -> str:
    """The distribution holding ``module`` -- or, for ``from X import name``, the nearest
    of ``X.name``, ``X``, ... that is a module with a file."""
    candidate = module
    while candidate:
        try:
            spec = importlib.util.find_spec(candidate)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.has_location and spec.origin:
            owner = _owners().get(str(Path(spec.origin).resolve()))
            if owner:
                return owner
        candidate = candidate.rpartition(".")[0]
    top = module.split(".")[0]
    return _name((importlib.metadata.packages_distributions().get(top) or [top])[0])


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(node: ast.AST, lazy: bool = False) -> Iterator[tuple[str, bool]]:
    """(absolute module, imported lazily: in a function or under TYPE_CHECKING) for
    each third-party import under ``node``."""
    if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        modules = [f"{node.module}.{alias.name}" for alias in node.names]  # a submodule, or a name in it
    else:
        modules = []
    for module in modules:
        if module.split(".")[0] not in (*sys.stdlib_module_names, *OURS):
            yield module, lazy
    inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    for child in ast.iter_child_nodes(node):
        typing_only = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and child in node.body
        yield from _imports(child, inner or typing_only)


def _problems() -> list[str]:
    core, extras = _declared()
    problems = []
    for path in SOURCES:
        where = _module_name(path)
        for module, lazy in _imports(ast.parse(path.read_text(), str(path))):
            found = _distribution(module)
            if found in core:
                continue
            homes = [extra for extra, names in extras.items() if extra != "test" and found in names]
            if not homes:
                problems.append(f"{where} imports {module} (distribution {found}): not declared")
            elif not lazy and not any(where.startswith(EXTRA_HOMES.get(extra, ("-",))) for extra in homes):
                problems.append(f"{where} imports {module} ([{', '.join(homes)}]) at module level")
    return problems


def test_every_third_party_import_is_declared() -> None:
    assert _problems() == []


def test_the_check_sees_an_undeclared_and_an_eager_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same check on sources of our own making: it objects to an undeclared module and
    # to an extra's module imported at module level, not to the extra imported lazily.
    package = tmp_path / "trio_agent"
    package.mkdir()
    (package / "_a.py").write_text("import jsonschema\n")  # only the [test] extra has it
    (package / "_b.py").write_text(
        "from typing import TYPE_CHECKING\nimport mcp\n\nif TYPE_CHECKING:\n    import pydantic\n\n"
        "def later() -> None:\n    from mcp_types import Implementation\n")
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "SOURCES", sorted(package.glob("*.py")))
    assert _problems() == [
        "trio_agent._a imports jsonschema (distribution jsonschema): not declared",
        "trio_agent._b imports mcp ([mcp]) at module level",
    ]
