"""The extension as a person gets it: from the wheel `pip wheel .` builds, installed into a fresh venv, found by
`openab extension path`, zipped by `openab extension pack` into its two builds, unzipped and loaded into real
Chromium, whose service worker then starts: the developer build under the fixed id its manifest's key gives, the
store build (no key: the Chrome Web Store refuses an upload that has one) under an id of Chrome's choosing."""

from __future__ import annotations

import asyncio
import json
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
    wheel = next((tmp_path / "dist").glob("openab_browser-*.whl"))
    shipped = {name.removeprefix("openab_browser/extension/") for name in zipfile.ZipFile(wheel).namelist()
               if name.startswith("openab_browser/extension/")}
    assert {"manifest.json", "background.js", "panel/sidepanel.html", "lib/mcp.js", "icons/icon128.png"} <= shipped
    assert shipped == extension_files(REPO / "extension"), "the wheel's extension differs from extension/"

    # A fresh venv holding only the wheel: what `pip install openab-browser` gives a person, minus the network.
    env_dir = tmp_path / "venv"
    await asyncio.to_thread(venv.create, env_dir, with_pip=True)
    await asyncio.to_thread(run, env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                            wheel)
    openab = env_dir / "bin" / "openab"
    folder = Path((await asyncio.to_thread(run, openab, "extension", "path")).strip())
    assert folder.is_relative_to(env_dir), f"{folder} is not the installed copy"
    assert extension_files(folder) == shipped

    said = (await asyncio.to_thread(run, openab, "extension", "pack", cwd=tmp_path)).splitlines()
    builds = dict(line.split(": ", 1) for line in said)
    assert set(builds) == {"developer", "store"}, said
    developer, store = Path(builds["developer"]), Path(builds["store"])
    assert (developer.parent, store.parent) == (tmp_path, tmp_path)
    assert (developer.name, store.name) == ("openab-extension-0.1.0-developer.zip", "openab-extension-0.1.0-store.zip")
    source = json.loads((REPO / "extension" / "manifest.json").read_text())
    for build, folder in ((developer, tmp_path / "developer"), (store, tmp_path / "store")):
        with zipfile.ZipFile(build) as archive:
            assert "manifest.json" in archive.namelist()  # at the root, as Chrome and the stores want it
            archive.extractall(folder)
        assert extension_files(folder) == shipped
    assert json.loads((tmp_path / "developer" / "manifest.json").read_text()) == source
    assert "key" in source
    assert json.loads((tmp_path / "store" / "manifest.json").read_text()) == {
        k: v for k, v in source.items() if k != "key"}
    # Packing twice gives the same bytes: a person can check a download against the pod's own pack.
    again = tmp_path / "again"
    await asyncio.to_thread(run, openab, "extension", "pack", "--output-dir", again)
    for build in (developer, store):
        assert await asyncio.to_thread((again / build.name).read_bytes) == await asyncio.to_thread(build.read_bytes)

    with site_server() as site:
        async with playwright_browser(tmp_path / "developer", tmp_path / "profile", f"{site}/index.html") as ctx:
            worker = await service_worker_url(ctx)
        assert worker == f"chrome-extension://{extension_id()}/background.js"
        async with playwright_browser(tmp_path / "store", tmp_path / "profile-store", f"{site}/index.html") as ctx:
            # Without the key Chrome names an unpacked extension after its folder: any id but the fixed one.
            started = ctx.service_workers[0] if ctx.service_workers else await ctx.wait_for_event(
                "serviceworker", lambda w: w.url.startswith("chrome-extension://"), timeout=30_000)
        assert started.url.endswith("/background.js") and extension_id() not in started.url, started.url
