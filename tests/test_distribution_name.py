"""A name of our own on the package index (issue 36, item 1).

The index's `openab` is another project ("Open Agent Bridge": its own `openab` import package with `openab/core/`,
and its own `openab` command). Ours installs as `openab-browser`, under the import package `openab_browser`, and keeps
the `openab` command. Against a local index holding both names (our wheel as `pip` builds it, and a stand-in of the
other with its layout: `openab/__init__.py`, `openab/core/`, `openab/cli/`, an `openab` console script):

* the install line of README.md and docs/deploy.md resolves to ours, and `pip install openab` to theirs;
* both installed side by side share no file but the `openab` command, whichever came last;
* ours, with theirs beside it, works and says so loudly on stderr (which project the other is, and what to do);
  `python -m openab_browser.gateway.cli` always runs ours, whoever holds the `openab` command;
* our version is our distribution's, never the other's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OURS = "openab-browser"
INSTALL_LINE = re.compile(r"pip install[^\n`]*\b(openab[\w.-]*)")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PEP 503 simple index in a folder: our wheel, and the stand-in of the index's `openab` 0.1.9."""
    root = tmp_path_factory.mktemp("index")
    wheels = root / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(wheels), str(REPO)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    theirs = root / "theirs"
    (theirs / "openab" / "core").mkdir(parents=True)
    (theirs / "openab" / "cli").mkdir()
    (theirs / "openab" / "__init__.py").write_text('"""Open Agent Bridge."""\n')
    (theirs / "openab" / "core" / "__init__.py").write_text("")
    (theirs / "openab" / "core" / "config.py").write_text("CONFIG = 1\n")
    (theirs / "openab" / "cli" / "__init__.py").write_text("")
    (theirs / "openab" / "cli" / "main.py").write_text("def main() -> None:\n    print('Open Agent Bridge 0.1.9')\n")
    (theirs / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=69"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "openab"
        version = "0.1.9"
        description = "Open Agent Bridge: chat platforms to coding agents"
        [project.scripts]
        openab = "openab.cli.main:main"
        [tool.setuptools]
        packages = ["openab", "openab.core", "openab.cli"]
        """))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(wheels), str(theirs)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    simple = root / "simple"
    for wheel in wheels.glob("*.whl"):
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        (simple / project).mkdir(parents=True, exist_ok=True)
        (simple / project / wheel.name).write_bytes(wheel.read_bytes())
        (simple / project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    return simple


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


def test_every_install_line_names_our_distribution() -> None:
    """In the docs, the recipes and the words the code says (an error telling how to reinstall)."""
    code = [path for folder in ("gateway", "core", "bridge", "extension", "scripts")
            for path in sorted((REPO / folder).rglob("*")) if path.suffix in (".py", ".js", ".html", ".sh")]
    for doc in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docker").rglob("*")),
                *code):
        if doc.is_file():
            for name in INSTALL_LINE.findall(doc.read_text(errors="replace")):
                assert name.split("[")[0] == OURS, f"{doc.name}: pip install {name}"


def test_the_install_line_resolves_to_ours_and_the_bare_name_to_theirs(index: Path, tmp_path: Path) -> None:
    for wanted, prefix in ((OURS, "openab_browser-"), ("openab", "openab-0.1.9")):
        got = pip("download", "--no-deps", "--index-url", index.as_uri(), "-d", str(tmp_path / wanted), wanted)
        assert got.returncode == 0, got.stderr
        (wheel,) = (tmp_path / wanted).glob("*.whl")
        assert wheel.name.startswith(prefix), wheel.name


def test_side_by_side_they_share_no_file_and_ours_works_and_says_so(index: Path, tmp_path: Path) -> None:
    wheels = {name: next(index.glob(f"{name}/*.whl")) for name in (OURS, "openab")}
    files = {name: set(zipfile.ZipFile(w).namelist()) for name, w in wheels.items()}
    ours = {f for f in files[OURS] if ".dist-info/" not in f}
    theirs = {f for f in files["openab"] if ".dist-info/" not in f}
    assert ours and theirs and not ours & theirs, sorted(ours & theirs)
    assert all(f.startswith("openab_browser/") for f in ours), sorted(f for f in ours if "/" not in f)
    # Both into one place, theirs last: every file of ours is still there.
    target = tmp_path / "site"
    for name in (OURS, "openab"):
        got = pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheels[name]))
        assert got.returncode == 0, got.stderr
    assert (target / "openab_browser" / "gateway" / "cli.py").is_file()
    assert (target / "openab" / "core" / "config.py").is_file()
    # Ours runs beside theirs (our dependencies from this environment, our code from the folder), and says loudly
    # which project the other is and what to do; its version is ours.
    env = {**os.environ, "PYTHONPATH": str(target), "PYTHONSAFEPATH": "1"}
    ran = subprocess.run([sys.executable, "-m", "openab_browser.gateway.cli", "--version"], capture_output=True,
                         text=True, timeout=60, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith("0.1.0"), ran.stdout
    assert "another project" in ran.stderr and "openab 0.1.9" in ran.stderr, ran.stderr
    assert "pip uninstall openab" in ran.stderr and "python -m openab_browser.gateway.cli" in ran.stderr, ran.stderr
