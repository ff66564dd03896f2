"""The extension as a person gets it: from the wheel `pip wheel .` builds, installed into a fresh venv, found by
`openab extension path`, zipped by `openab extension pack`, unzipped and loaded into real Chromium, whose
service worker then starts."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from .harness import REPO, extension_id, playwright_browser, service_worker_url, site_server

pytestmark = pytest.mark.anyio


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


def extension_files(folder: Path) -> set[str]:
    # Dotfiles (extension/.gitignore) are the repository's, not the extension's.
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and not p.relative_to(folder).as_posix().startswith(".")}


async def test_the_wheel_carries_the_extension_and_the_packed_zip_loads_in_chromium(tmp_path: Path) -> None:
    await asyncio.to_thread(run, sys.executable, "-m", "pip", "wheel", REPO, "-w", tmp_path / "dist", "--no-deps",
                            "-q")
    wheel = next((tmp_path / "dist").glob("openab-*.whl"))
    shipped = {name.removeprefix("openab/extension/") for name in zipfile.ZipFile(wheel).namelist()
               if name.startswith("openab/extension/")}
    assert {"manifest.json", "background.js", "panel/sidepanel.html", "lib/mcp.js", "icons/icon128.png"} <= shipped
    assert shipped == extension_files(REPO / "extension"), "the wheel's extension differs from extension/"

    # A fresh venv holding only the wheel: what `pip install openab` gives a person, minus the network.
    env_dir = tmp_path / "venv"
    await asyncio.to_thread(venv.create, env_dir, with_pip=True)
    await asyncio.to_thread(run, env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                            wheel)
    openab = env_dir / "bin" / "openab"
    folder = Path((await asyncio.to_thread(run, openab, "extension", "path")).strip())
    assert folder.is_relative_to(env_dir), f"{folder} is not the installed copy"
    assert extension_files(folder) == shipped

    packed = Path((await asyncio.to_thread(run, openab, "extension", "pack", cwd=tmp_path)).strip())
    assert packed == tmp_path / "openab-extension-0.1.0.zip" or packed.name.startswith("openab-extension-")
    with zipfile.ZipFile(packed) as archive:
        assert "manifest.json" in archive.namelist()  # at the root, as Chrome and the stores want it
        archive.extractall(tmp_path / "unzipped")
    assert extension_files(tmp_path / "unzipped") == shipped
    # Packing twice gives the same bytes: a person can check a download against the pod's own pack.
    again = tmp_path / "again.zip"
    await asyncio.to_thread(run, openab, "extension", "pack", "--output", again)
    assert await asyncio.to_thread(again.read_bytes) == await asyncio.to_thread(packed.read_bytes)

    with site_server() as site:
        async with playwright_browser(tmp_path / "unzipped", tmp_path / "profile", f"{site}/index.html") as ctx:
            worker = await service_worker_url(ctx)
    assert worker == f"chrome-extension://{extension_id()}/background.js"
