"""The wheel as `pip install` builds it: quiet (setuptools warns of nothing in it) and carrying every file of the
extension under ``openab_browser/extension``. The wheel loaded into Chromium is
tests/browser/test_extension_package.py's."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def extension_files(folder: Path) -> set[str]:
    # Dotfiles (extension/.gitignore) and a checkout's defaults.json are the developer's, not the extension's.
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and not p.relative_to(folder).as_posix().startswith(".")
            and "__pycache__" not in p.parts and p.name != "defaults.json"}


def test_the_wheel_builds_without_setuptools_warnings_and_ships_the_whole_extension(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(REPO)],
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    # A subfolder of extension/ that is not a listed package makes setuptools print a dozen-line warning for it.
    assert "Package would be ignored" not in said, said
    assert "SetuptoolsDeprecationWarning" not in said, said
    wheel = next(tmp_path.glob("openab_browser-*.whl"))
    shipped = {name.removeprefix("openab_browser/extension/") for name in zipfile.ZipFile(wheel).namelist()
               if name.startswith("openab_browser/extension/")}
    assert {"manifest.json", "background.js", "panel/sidepanel.html", "lib/mcp.js", "icons/icon128.png",
            "page/agent.js"} <= shipped
    assert shipped == extension_files(REPO / "extension"), "the wheel's extension differs from extension/"
    # Every module of the three hops is in the wheel: a subpackage missing from pyproject.toml's list installs
    # without a word and fails only when the pod imports it (the image's pod did, for openab_browser.core.files).
    modules = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".py")}
    for hop in ("core", "gateway", "bridge"):
        here = {f"openab_browser/{hop}/{p.relative_to(REPO / hop).as_posix()}" for p in (REPO / hop).rglob("*.py")}
        assert here <= modules, f"not in the wheel: {sorted(here - modules)}"


def test_the_uvicorn_range_is_the_one_the_socket_tests_run_at_both_ends() -> None:
    """pyproject.toml's uvicorn range, scripts/test's two ends and constraints.txt's pin agree: the lower end is the
    range's floor, the upper end the newest release below its ceiling, and the pin inside."""
    import re
    import tomllib

    from packaging.specifiers import SpecifierSet

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (wanted,) = [d for d in project["dependencies"] if d.startswith("uvicorn")]
    specifiers = SpecifierSet(wanted.removeprefix("uvicorn"))
    match = re.search(r'^UVICORN_ENDS="([^"]+)"', (REPO / "scripts" / "test").read_text(), re.MULTILINE)
    assert match is not None
    low, high = match.group(1).split()
    floor = next(s.version for s in specifiers if s.operator == ">=")
    ceiling = next(s.version for s in specifiers if s.operator == "<")
    assert low.startswith(floor) and high in specifiers and low in specifiers
    assert high.split(".")[:2] == [ceiling.split(".")[0], str(int(ceiling.split(".")[1]) - 1)]
    (pin,) = re.findall(r"^uvicorn==(\S+)$", (REPO / "constraints.txt").read_text(), re.MULTILINE)
    assert pin in specifiers
