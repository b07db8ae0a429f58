"""The layers of ``trio_agent`` (docs/architecture.md, "Layers"): every import of every
module -- at module level, in a function, under ``TYPE_CHECKING`` -- goes to the
importer's own layer or below, except the imports the page lists; the import cycles
stay at most the page's figure.

The rank table, the exceptions and the figure are read from docs/architecture.md, so
the page and the check cannot drift. The checker is tried on sources of our own
making too (positive controls): an upward import of each kind, a cycle, an exception
that no longer matches, a module no row names.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import pytest

import trio_agent

PACKAGE_ROOT = Path(trio_agent.__file__).resolve().parent
DOC = PACKAGE_ROOT.parent / "docs" / "architecture.md"
PACKAGE = "trio_agent"


# -- the page ---------------------------------------------------------------------------


@attrs.frozen
class Layers:
    """The rank table, the allowed upward imports and the cycle figure of the page."""

    ranks: dict[str, int]  # a row's name (relative to the package) -> its rank
    exceptions: dict[tuple[str, str], str]  # (importer, imported), relative -> why
    max_cycles: int

    def rank_of(self, module: str) -> int | None:
        """The rank of the most specific row naming ``module`` (None: no row does)."""
        matches = [name for name in self.ranks if _names(name, relative(module))]
        return self.ranks[max(matches, key=len)] if matches else None


def relative(module: str) -> str:
    """``trio_agent.x.y`` -> ``x.y``; the package itself is ``__init__``."""
    return "__init__" if module == PACKAGE else module.removeprefix(PACKAGE + ".")


def _names(row: str, module: str) -> bool:
    if row == "__init__" or module == "__init__":
        return row == module
    head = module.split(".")
    parts = row.split(".")
    if len(head) < len(parts):
        return False
    return all(fnmatch.fnmatchcase(part, pattern) for part, pattern in zip(head, parts, strict=False))


def _table(text: str, heading: str) -> list[list[str]]:
    """The body rows of the first Markdown table after ``heading``, as cells."""
    section = text.split(heading, 1)[1]
    rows: list[list[str]] = []
    for line in section.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            if rows:
                break
            continue
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    assert rows, f"no table after {heading!r}"
    return [row for row in rows[1:] if not set("".join(row)) <= set("-: ")]  # without header and rule


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def parse_layers(text: str) -> Layers:
    ranks: dict[str, int] = {}
    for row in _table(text, "### Rank table"):
        for name in _code(row[2]):
            assert name not in ranks, f"{name} has two rows"
            ranks[name] = int(row[0])
    exceptions: dict[tuple[str, str], str] = {}
    for row in _table(text, "### Allowed upward imports"):
        (importer,), (imported,) = _code(row[0]), _code(row[1])
        assert row[2], f"{importer} -> {imported} gives no reason"
        exceptions[(importer, imported)] = row[2]
    found = re.search(r"^Import cycles: (\d+)$", text, re.MULTILINE)
    assert found, "no 'Import cycles: N' line"
    return Layers(ranks, exceptions, int(found.group(1)))


# -- the imports ------------------------------------------------------------------------


@attrs.frozen
class Import:
    importer: str
    imported: str
    kind: str  # "module", "function" or "type-only"
    line: int


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST, kind: str = "module") -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, kind
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        for child in node.body:
            yield from _import_nodes(child, "type-only")
        for child in node.orelse:
            yield from _import_nodes(child, kind)
        return
    inner = "function" if kind == "module" and isinstance(
        node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else kind
    for child in ast.iter_child_nodes(node):
        yield from _import_nodes(child, inner)


def _resolve(package: str, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    base = package.split(".")
    if level > 1:
        base = base[: -(level - 1)]
    return ".".join([*base, module] if module else base)


def _nearest(name: str, modules: set[str]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, source: str, modules: set[str], *, is_package: bool = False) -> list[Import]:
    """Every import of one of ``modules`` in ``source`` (the text of ``module``): a
    ``from x import y`` names the module ``x.y`` when there is one, else ``x``."""
    package = module if is_package else module.rpartition(".")[0]
    found: dict[tuple[str, str], Import] = {}
    order = {"module": 0, "function": 1, "type-only": 2}
    for node, kind in _import_nodes(ast.parse(source)):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [_nearest(alias.name, modules) for alias in node.names if alias.name.split(".")[0] == PACKAGE]
        else:
            base = _resolve(package, node.module, node.level)
            if base.split(".")[0] == PACKAGE:
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else _nearest(base, modules)
                           for a in node.names]
        for target in targets:
            if target is None or target == module:
                continue
            key = (module, target)
            if key not in found or order[kind] < order[found[key].kind]:  # the strongest kind counts
                found[key] = Import(module, target, kind, node.lineno)
    return list(found.values())


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_sources(root: Path = PACKAGE_ROOT) -> dict[str, tuple[str, bool]]:
    """module -> (source, is a package's ``__init__``), for every module under ``root``."""
    return {module_name(path, root): (path.read_text(encoding="utf-8"), path.name == "__init__.py")
            for path in sorted(root.rglob("*.py")) if "__pycache__" not in path.parts}


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> list[Import]:
    modules = set(sources)
    return [found for module, (source, is_package) in sources.items()
            for found in imports_of(module, source, modules, is_package=is_package)]


# -- the checks -------------------------------------------------------------------------


def upward(imports: list[Import], layers: Layers) -> list[Import]:
    """The imports from a lower layer to a higher one (exceptions included)."""
    out = []
    for found in imports:
        low, high = layers.rank_of(found.importer), layers.rank_of(found.imported)
        assert low is not None and high is not None, f"no rank for {found}"
        if high > low:
            out.append(found)
    return out


def violations(imports: list[Import], layers: Layers) -> list[str]:
    """Upward imports the page does not allow, and allowed ones no import needs."""
    problems = []
    seen = set()
    for found in upward(imports, layers):
        key = (relative(found.importer), relative(found.imported))
        seen.add(key)
        if key not in layers.exceptions:
            problems.append(f"{key[0]} (line {found.line}, {found.kind}) imports {key[1]}, a higher layer")
    problems.extend(f"allowed upward import {a} -> {b} is no longer needed: drop its row"
                    for a, b in sorted(layers.exceptions.keys() - seen))
    return problems


def cycles(imports: list[Import]) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module,
    leaving out each module's imports of its own packages' ``__init__``."""
    graph: dict[str, list[str]] = {}
    for found in imports:
        graph.setdefault(found.imported, [])
        if not found.importer.startswith(found.imported + "."):
            graph.setdefault(found.importer, []).append(found.imported)
        else:
            graph.setdefault(found.importer, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def connect(start: str) -> None:  # Tarjan's algorithm, iteratively
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(components)


def early_submodules(sources: Mapping[str, tuple[str, bool]], layers: Layers) -> list[str]:
    """Modules ranked below their package whose ``__init__`` imports ours at run time."""
    problems = []
    modules = set(sources)
    for module in modules:
        package = module.rpartition(".")[0]
        while package and package != PACKAGE:
            below = (layers.rank_of(module) or 0) < (layers.rank_of(package) or 0)
            if below:
                source, _ = sources[package]
                eager = [f.imported for f in imports_of(package, source, modules, is_package=True)
                         if f.kind == "module"]
                if eager:
                    problems.append(f"{relative(module)} ranks below {relative(package)}, whose __init__ "
                                    f"imports {relative(eager[0])} at load")
            package = package.rpartition(".")[0]
    return sorted(problems)


@pytest.fixture(scope="module")
def layers() -> Layers:
    return parse_layers(DOC.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def sources() -> dict[str, tuple[str, bool]]:
    return package_sources()


def test_every_module_has_a_layer_and_every_row_a_module(
        layers: Layers, sources: dict[str, tuple[str, bool]]) -> None:
    assert [m for m in sorted(sources) if layers.rank_of(m) is None] == []
    assert [row for row in layers.ranks if not any(_names(row, relative(m)) for m in sources)] == []


def test_no_module_imports_a_higher_layer(layers: Layers, sources: dict[str, tuple[str, bool]]) -> None:
    imports = import_graph(sources)
    assert violations(imports, layers) == []
    assert len(upward(imports, layers)) == len(layers.exceptions)


def test_a_submodule_ranked_below_its_package_has_a_lazy_package(
        layers: Layers, sources: dict[str, tuple[str, bool]]) -> None:
    assert early_submodules(sources, layers) == []


def test_import_cycles_stay_within_the_figure(layers: Layers, sources: dict[str, tuple[str, bool]]) -> None:
    found = cycles(import_graph(sources))
    sizes = sorted(len(component) for component in found)
    print(f"import cycles: {len(found)} (sizes {sizes}); upward imports: {len(layers.exceptions)}")
    assert len(found) <= layers.max_cycles, [[relative(m) for m in c] for c in found]


# -- positive controls: the checker on sources of our own making ------------------------

PAGE = """
### Rank table

| Rank | Layer | Modules | What |
|---:|---|---|---|
| 0 | low | `_low`, `_pkg._shared` | |
| 1 | high | `_high*`, `_pkg` | |
| 2 | face | `__init__` | |

### Allowed upward imports

| Importer | Imported | Why |
|---|---|---|
| `_low` | `_high_allowed` | a reason |

Import cycles: 0
"""


def _fake(files: dict[str, str]) -> dict[str, tuple[str, bool]]:
    return {name: (source, name in ("trio_agent", "trio_agent._pkg")) for name, source in files.items()}


def test_the_page_parser_reads_ranks_exceptions_and_figure() -> None:
    parsed = parse_layers(PAGE)
    assert parsed.ranks == {"_low": 0, "_pkg._shared": 0, "_high*": 1, "_pkg": 1, "__init__": 2}
    assert parsed.exceptions == {("_low", "_high_allowed"): "a reason"}
    assert parsed.max_cycles == 0
    assert [parsed.rank_of(m) for m in ("trio_agent._low", "trio_agent._high_x", "trio_agent._pkg._shared",
                                        "trio_agent._pkg.other", "trio_agent", "trio_agent._other")] == [
        0, 1, 0, 1, 2, None]


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("from ._high import x\n", "module"),
        ("import trio_agent._high\n", "module"),
        ("from . import _high\n", "module"),
        ("def f():\n    from ._high import x\n", "function"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._high import x\n", "type-only"),
        ("import typing\nif typing.TYPE_CHECKING:\n    from trio_agent._high import x\n", "type-only"),
        ("from . import __version__\n", "module"),  # the package face
    ],
)
def test_the_checker_flags_an_upward_import_of_each_kind(source: str, kind: str) -> None:
    files = _fake({"trio_agent": "", "trio_agent._low": source, "trio_agent._high": "",
                   "trio_agent._high_allowed": "", "trio_agent._pkg": "", "trio_agent._pkg._shared": ""})
    problems = violations(import_graph(files), parse_layers(PAGE))
    assert len(problems) == 2, problems  # the import, and the exception left unused
    target = "__init__" if "__version__" in source else "_high"
    assert problems[0].startswith("_low (line ") and problems[0].endswith(f"{kind}) imports {target}, a higher layer")
    assert "_low -> _high_allowed is no longer needed" in problems[1]


def test_the_checker_accepts_downward_and_allowed_imports() -> None:
    files = _fake({"trio_agent": "from ._high import x\n", "trio_agent._low": "from ._high_allowed import y\n",
                   "trio_agent._high": "from ._low import z\nfrom ._pkg._shared import w\n",
                   "trio_agent._high_allowed": "", "trio_agent._pkg": "", "trio_agent._pkg._shared": ""})
    assert violations(import_graph(files), parse_layers(PAGE)) == []


def test_the_checker_sees_a_cycle_but_not_a_package_importing_its_own_init() -> None:
    files = _fake({"trio_agent": "from ._high import x\n", "trio_agent._low": "from ._high import x\n",
                   "trio_agent._high": "def f():\n    from ._low import y\n",
                   "trio_agent._high_allowed": "from . import __version__\n",
                   "trio_agent._pkg": "", "trio_agent._pkg._shared": ""})
    assert cycles(import_graph(files)) == [["trio_agent._high", "trio_agent._low"]]


def test_the_checker_refuses_a_submodule_below_an_eager_package() -> None:
    files = _fake({"trio_agent": "", "trio_agent._low": "", "trio_agent._high": "", "trio_agent._high_allowed": "",
                   "trio_agent._pkg": "from ._other import x\n", "trio_agent._pkg._shared": "",
                   "trio_agent._pkg._other": ""})
    assert early_submodules(files, parse_layers(PAGE)) == [
        "_pkg._shared ranks below _pkg, whose __init__ imports _pkg._other at load"]
