"""Headless Chromium with the openab extension, pointed at a local gateway, for `openab demo`.

The extension is copied to a temp folder with a ``defaults.json`` (gateway URL and key) it reads on its first
start, and Chromium runs as a plain child in its own process group, killed as a group at the end. Its DevTools
protocol (the side panel's screenshot, .demo_panel) is on a pair of pipes only this process holds
(``--remote-debugging-pipe``: commands on the child's fd 3, answers on its fd 4), never on a port: a DevTools port
on loopback would let any local user drive the demo's browser and read the gateway key the extension stores.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "HOW_TO_GET_CHROMIUM", "DemoChromium", "chromium_path", "extension_dir", "headless_chromium", "how_to_load_by_hand",
]

# /usr/lib/chromium/chromium first: Debian's /usr/bin/chromium is a wrapper script that adds flags of its own.
_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-default-apps", "--disable-dev-shm-usage", "--password-store=basic",
    "--window-size=1280,943", "--remote-debugging-pipe",
)
# The child's descriptors for --remote-debugging-pipe, fixed by Chromium.
_PIPE_IN, _PIPE_OUT = 3, 4

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


@dataclass(frozen=True)
class DemoChromium:
    """The running demo browser: its process id (the leader of its own process group) and this process's ends of
    its DevTools pipes: ``devtools_send`` to write commands to, ``devtools_receive`` to read answers from."""

    pid: int
    devtools_send: int
    devtools_receive: int


def _spawn(command: list[str], log: int, commands: int, answers: int) -> int:
    # posix_spawn, not subprocess: the child needs the pipes at the fixed descriptors 3 and 4, which Popen cannot
    # place without a preexec_fn (unsafe once the event loop has threads).
    return os.posix_spawn(command[0], command, dict(os.environ), setsid=True, file_actions=[
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_DUP2, log, 2),
        (os.POSIX_SPAWN_DUP2, commands, _PIPE_IN),
        (os.POSIX_SPAWN_DUP2, answers, _PIPE_OUT),
    ])


def _reap(pid: int, timeout: float) -> bool:
    """Waits up to ``timeout`` seconds for the child to exit; True once it has."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)  # a child's exit has no event to wait on here; bounded by the deadline above


@contextlib.contextmanager
def headless_chromium(
    binary: str, extension: Path, workdir: Path, *, ws_url: str, key: str, start_url: str
) -> Iterator[DemoChromium]:
    staged = workdir / "extension"
    shutil.copytree(extension, staged)
    # autopilot stays off: the extension's guard still stops risky clicks, and the demo task has none.
    (staged / "defaults.json").write_text(json.dumps({"url": ws_url, "key": key}))
    command = [binary, *_FLAGS, f"--user-data-dir={workdir / 'profile'}",
               f"--disable-extensions-except={staged}", f"--load-extension={staged}", start_url]
    commands_read, commands_write = os.pipe()
    answers_read, answers_write = os.pipe()
    with (workdir / "chromium.log").open("wb") as log:
        try:
            pid = _spawn(command, log.fileno(), commands_read, answers_write)
        except BaseException:
            for fd in (commands_write, answers_read):
                os.close(fd)
            raise
        finally:
            for fd in (commands_read, answers_write):
                os.close(fd)
        try:
            yield DemoChromium(pid, commands_write, answers_read)
        finally:
            for fd in (commands_write, answers_read):
                with contextlib.suppress(OSError):
                    os.close(fd)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, sig)
                if _reap(pid, 10):
                    break
