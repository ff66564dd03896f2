"""The extension's layer contract, held: each part imports only what docs/extension.md's "Layers" table allows it,
and no module imports itself round a cycle.

The JavaScript twin of tests/test_layers.py. The table is read from the document, so the two cannot drift apart.
Every import counts: ``import ... from``, a bare ``import '...'``, ``export ... from`` and a dynamic ``import()``
(the service worker loads some modules lazily); a file no row covers fails the check.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_layers import adjacency, cycles

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "extension"
DOCUMENT = ROOT / "docs" / "extension.md"
# Specifiers in quotes after `from`, after a bare `import`, or inside `import(...)`; comments are removed first.
_SPECIFIER = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)(['"])([^'"]+)\1""", re.MULTILINE)
_COMMENT = re.compile(r"/\*.*?\*/|(?<![:'\"\\])//[^\n]*", re.DOTALL)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str


@dataclass(frozen=True)
class Contract:
    allowed: Mapping[str, frozenset[str]]  # a part ("lib/", "background.js") -> the parts it may import

    def part_of(self, file: str) -> str | None:
        """The longest part that covers ``file`` (a path relative to extension/)."""
        covering = [part for part in self.allowed if file == part or (part.endswith("/") and file.startswith(part))]
        return max(covering, key=len, default=None)


def read_contract(text: str) -> Contract:
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    allowed: dict[str, frozenset[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 2 or cells[0] in ("part", "") or cells[0].startswith("-"):
            continue
        (part,) = re.findall(r"`([^`]+)`", cells[0])
        allowed[part] = frozenset(re.findall(r"`([^`]+)`", cells[1].split(":")[0]))
    return Contract(allowed)


def modules(root: Path = EXTENSION) -> dict[str, Path]:
    return {path.relative_to(root).as_posix(): path for path in sorted(root.rglob("*.js"))
            if "node_modules" not in path.parts}


def imports(file: str, path: Path) -> Iterator[Edge]:
    """The extension files ``file`` imports (relative specifiers only: the extension has no packages)."""
    text = _COMMENT.sub("", path.read_text())
    for match in _SPECIFIER.finditer(text):
        specifier = match.group(2)
        if specifier.startswith("."):
            yield Edge(file, posixpath.normpath(posixpath.join(posixpath.dirname(file), specifier)))
        elif specifier.startswith("/"):  # from the extension's root, as chrome-extension:// URLs resolve it
            yield Edge(file, specifier.lstrip("/"))


def violations(contract: Contract, graph: list[Edge]) -> list[str]:
    found = []
    for edge in graph:
        source, target = contract.part_of(edge.source), contract.part_of(edge.target)
        if source is None or target is None or target not in contract.allowed[source]:
            found.append(f"{edge.source} ({source}) imports {edge.target} ({target})")
    return found


@pytest.fixture(scope="module")
def contract() -> Contract:
    return read_contract(DOCUMENT.read_text())


@pytest.fixture(scope="module")
def graph() -> list[Edge]:
    return [edge for file, path in modules().items() for edge in imports(file, path)]


def test_the_table_is_read(contract: Contract) -> None:
    assert set(contract.allowed) >= {"background.js", "panel/", "lib/", "page/"}
    assert contract.allowed["page/"] == frozenset()
    assert contract.allowed["lib/"] == frozenset({"lib/"})


def test_every_file_has_a_part(contract: Contract) -> None:
    missing = sorted(file for file in modules() if contract.part_of(file) is None)
    assert not missing, f"give these a row in docs/extension.md's Layers table: {missing}"


def test_every_import_is_one_its_part_may_make(contract: Contract, graph: list[Edge]) -> None:
    assert graph, "no import found: the reader is broken"
    found = violations(contract, graph)
    assert not found, "imports the Layers table does not allow; move what both need into lib/:\n" + "\n".join(found)


def test_every_import_names_a_file_that_exists(graph: list[Edge]) -> None:
    known = modules()
    missing = sorted(f"{edge.source} imports {edge.target}" for edge in graph if edge.target not in known)
    assert not missing, missing


def test_no_module_imports_itself_round_a_cycle(graph: list[Edge]) -> None:
    found = cycles(adjacency(((edge.source, edge.target) for edge in graph), modules()))
    assert not found, f"import cycles in the extension: {found}"


def test_the_checks_see_what_they_must(tmp_path: Path) -> None:
    """Each kind of import is read and each planted bad one is caught: lib importing the panel (static, dynamic,
    re-exported, bare), a page script importing anything, a cycle; comments are not imports."""
    files = {
        "background.js": "import { a } from './lib/a.js';\n",
        "lib/a.js": "// import { x } from '../panel/x.js';\nimport { b } from './b.js';\n",
        "lib/b.js": "export { y } from '../panel/y.js';\nconst m = await import('../panel/x.js');\n"
                    "/* import '../pair/p.js' */\nimport './a.js';\n",
        "panel/x.js": "import { a } from '../lib/a.js';\n",
        "panel/y.js": "",
        "page/z.js": "import { a } from '../lib/a.js';\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = [edge for file, path in modules(tmp_path).items() for edge in imports(file, path)]
    assert {(e.source, e.target) for e in found} == {
        ("background.js", "lib/a.js"), ("lib/a.js", "lib/b.js"), ("lib/b.js", "panel/y.js"),
        ("lib/b.js", "panel/x.js"), ("lib/b.js", "lib/a.js"), ("panel/x.js", "lib/a.js"), ("page/z.js", "lib/a.js"),
    }
    contract = read_contract(DOCUMENT.read_text())
    assert sorted(violations(contract, found)) == [
        "lib/b.js (lib/) imports panel/x.js (panel/)", "lib/b.js (lib/) imports panel/y.js (panel/)",
        "page/z.js (page/) imports lib/a.js (lib/)",
    ]
    assert cycles(adjacency((edge.source, edge.target) for edge in found)) == [["lib/a.js", "lib/b.js", "panel/x.js"]]
