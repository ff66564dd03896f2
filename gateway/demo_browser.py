"""Headless Chromium with the openab extension, pointed at a local gateway, for `openab demo`.

The extension is copied to a temp folder with a ``defaults.json`` (gateway URL and key) it reads on its first
start, and Chromium runs as a plain child in its own process group, killed as a group at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["HOW_TO_GET_CHROMIUM", "chromium_path", "extension_dir", "headless_chromium", "how_to_load_by_hand"]

# /usr/lib/chromium/chromium first: Debian's /usr/bin/chromium is a wrapper script that adds flags of its own.
_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-default-apps", "--disable-dev-shm-usage", "--password-store=basic",
    "--window-size=1280,943",
    # The DevTools port the side panel's screenshot is taken through (.demo_panel), on loopback, at a free port.
    "--remote-debugging-port=0",
)

HOW_TO_GET_CHROMIUM = (
    "Chromium was not found. Install it (Debian/Ubuntu: `sudo apt-get install chromium`; macOS: "
    "`brew install --cask chromium`), or pass --chromium PATH, or run `openab demo --no-browser` and load the "
    "extension by hand."
)


def chromium_path(explicit: str | None = None) -> str | None:
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for path in _CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def extension_dir(explicit: str | None = None) -> Path | None:
    """The extension's folder: --extension, $OPENAB_EXTENSION_DIR, or extension/ of this source tree."""
    source_tree = Path(__file__).resolve().parents[1] / "extension"
    candidates = [explicit, os.environ.get("OPENAB_EXTENSION_DIR"), str(source_tree)]
    for candidate in candidates:
        if candidate and (Path(candidate) / "manifest.json").is_file():
            return Path(candidate)
    return None


def how_to_load_by_hand(extension: Path | None, ws_url: str, key: str) -> str:
    where = str(extension) if extension else "the extension/ folder of an openab checkout"
    return (
        "To use your own Chrome: open chrome://extensions, turn on Developer mode, click “Load unpacked” and pick "
        f"{where}. Open the openab side panel, set the gateway URL to {ws_url} and the key to {key}, then type a "
        "task such as “open https://example.org then read”."
    )


@contextlib.contextmanager
def headless_chromium(
    binary: str, extension: Path, workdir: Path, *, ws_url: str, key: str, start_url: str
) -> Iterator[subprocess.Popen[bytes]]:
    staged = workdir / "extension"
    shutil.copytree(extension, staged)
    # autopilot stays off: the extension's guard still stops risky clicks, and the demo task has none.
    (staged / "defaults.json").write_text(json.dumps({"url": ws_url, "key": key}))
    log = (workdir / "chromium.log").open("wb")
    command = [binary, *_FLAGS, f"--user-data-dir={workdir / 'profile'}",
               f"--disable-extensions-except={staged}", f"--load-extension={staged}", start_url]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                               start_new_session=True)
    try:
        yield process
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(10)
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()
