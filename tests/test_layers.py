"""The layer contract of docs/architecture.md, held: imports point only down the data flow, never in a cycle.

The layers are read from the "Layers" table of docs/architecture.md itself, so the document and the check
cannot drift apart. Every import counts, wherever it is written: at the top, inside a function (a lazy import
is still a dependency) and under ``TYPE_CHECKING`` (a type that names an upper layer ties the lower one to it).
A module the table does not map fails the check unless the document lists it as not yet mapped.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
# Where each installed package's source lives in the tree (pyproject's package-dir).
PACKAGES: Mapping[str, str] = {"openab_browser.core": "core", "openab_browser.gateway": "gateway",
                               "openab_browser.bridge": "bridge"}
PACKAGE_ITSELF = ".__init__"  # how the table names a package's own module, not its submodules


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int


@dataclass(frozen=True)
class Contract:
    layers: tuple[tuple[str, tuple[str, ...]], ...]  # top first: (layer name, module patterns)
    unmapped: frozenset[str]

    def layer_of(self, module: str) -> int | None:
        """The index of ``module``'s layer (0 is the top), by the longest pattern that covers it."""
        best: tuple[int, int] | None = None
        for index, (_name, patterns) in enumerate(self.layers):
            for pattern in patterns:
                if pattern.endswith(PACKAGE_ITSELF):
                    covers = module == pattern.removesuffix(PACKAGE_ITSELF)
                else:
                    covers = module == pattern or module.startswith(pattern + ".")
                if covers and (best is None or len(pattern) > best[1]):
                    best = (index, len(pattern))
        return None if best is None else best[0]

    def name(self, index: int) -> str:
        return self.layers[index][0]


def read_contract(text: str) -> Contract:
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    layers: list[tuple[str, tuple[str, ...]]] = []
    unmapped: set[str] = set()
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0] not in ("layer", "") and not cells[0].startswith("-"):
            layers.append((cells[0], tuple(re.findall(r"`(openab[\w.]*)`", cells[1]))))
        elif line.startswith("Not yet mapped:"):
            unmapped.update(re.findall(r"`(openab[\w.]*)`", line))
    return Contract(tuple(layers), frozenset(unmapped))


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def imports(module: str, path: Path, known: Mapping[str, Path]) -> Iterator[Import]:
    """Every openab module ``module`` imports; ``from pkg import sub`` counts as importing ``pkg.sub`` only. In a
    module that imports by name (``importlib.import_module``, ``__import__``), a string naming a module of ours
    counts too, wherever it is written (as ``gateway/cli.py`` lists its subcommands' modules and loads each)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    by_name = any(isinstance(node, ast.Call) and _callee(node) in ("import_module", "__import__")
                  for node in ast.walk(tree))
    for node in ast.walk(tree):
        if by_name and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            if node.value != module:
                yield Import(module, node.value, node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            submodules = [f"{origin}.{alias.name}" for alias in node.names if f"{origin}.{alias.name}" in known]
            yield from (Import(module, target, node.lineno) for target in submodules)
            if len(submodules) < len(node.names) and origin in known and origin != module:
                yield Import(module, origin, node.lineno)


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else None


def adjacency(pairs: Iterable[tuple[str, str]], nodes: Iterable[str] = ()) -> dict[str, set[str]]:
    """Each node's targets, from (source, target) pairs: every node named, a target with none of its own too."""
    edges: dict[str, set[str]] = {node: set() for node in nodes}
    for source, target in pairs:
        edges.setdefault(source, set()).add(target)
        edges.setdefault(target, set())
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def contract() -> Contract:
    return read_contract(ARCHITECTURE.read_text())


@pytest.fixture(scope="module")
def graph() -> list[Import]:
    known = modules()
    return [edge for module, path in known.items() for edge in imports(module, path, known)]


def test_the_table_is_read(contract: Contract) -> None:
    names = [name for name, _ in contract.layers]
    assert names[0] == "gateway" and "jsonrpc" in names and all(patterns for _, patterns in contract.layers), names


def test_every_module_has_a_layer_or_is_listed_as_not_yet_mapped(contract: Contract) -> None:
    missing = sorted(m for m in modules() if contract.layer_of(m) is None and m not in contract.unmapped)
    assert not missing, f"map these in docs/architecture.md's Layers table (or list them as not yet mapped): {missing}"
    stale = sorted(contract.unmapped - set(modules()))
    assert not stale, f"docs/architecture.md lists modules that no longer exist as not yet mapped: {stale}"


def test_imports_only_point_down_the_layers(contract: Contract, graph: list[Import]) -> None:
    upward = []
    for edge in graph:
        source, target = contract.layer_of(edge.source), contract.layer_of(edge.target)
        if source is not None and target is not None and target < source:
            upward.append(f"{edge.source}:{edge.line} ({contract.name(source)}) imports {edge.target} "
                          f"({contract.name(target)})")
    assert not upward, "imports that point up the layers; move what both need below both:\n" + "\n".join(upward)


def test_no_module_imports_itself_round_a_cycle(graph: list[Import]) -> None:
    found = cycles(adjacency(((edge.source, edge.target) for edge in graph), modules()))
    assert not found, f"import cycles: give what the modules share a module of its own below them: {found}"


def test_the_checks_see_what_they_must(tmp_path: Path) -> None:
    """The reader catches each kind of import the contract counts, and the cycle finder a cycle."""
    known = {f"openab_browser.core.{name}": Path() for name in ("a", "b", "c", "d", "pkg", "pkg.sub")}
    source = (
        "from __future__ import annotations\nfrom typing import TYPE_CHECKING\nimport openab_browser.core.c\n"
        "if TYPE_CHECKING:\n    from .a import X\ndef f():\n    from . import b\n    from .pkg import sub, Y\n"
        "def g():\n    importlib.import_module('openab_browser.core.d')\n"
    )
    probe = tmp_path / "x.py"
    probe.write_text(source)
    found = {edge.target for edge in imports("openab_browser.core.x", probe, known)}
    assert found == {"openab_browser.core.a", "openab_browser.core.b", "openab_browser.core.c",
                     "openab_browser.core.d", "openab_browser.core.pkg", "openab_browser.core.pkg.sub"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    contract = read_contract("\n## Layers\n| layer | modules |\n|---|---|\n| top | `openab.t` |\n"
                             "| base | `openab.t.__init__`, `openab.t.low` |\nNot yet mapped: `openab.x`\n## Next\n")
    assert [contract.layer_of(m) for m in ("openab.t", "openab.t.mid", "openab.t.low.deep")] == [1, 0, 1]
    assert contract.unmapped == {"openab.x"}
