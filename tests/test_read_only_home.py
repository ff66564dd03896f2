"""A pod whose state dir cannot be written (a read-only root filesystem and no volume on HOME) stops with one line
saying which path must be writable and what to mount or set, status 2: never a Python traceback.

Each is the real thing: HOME on a read-only bind mount in a private mount namespace (`unshare -m`; root alone
cannot be kept from writing by a mode), HOME naming a file, and no HOME at all for a uid that has no passwd
entry (as a container runtime gives an arbitrary uid).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_key_files import as_uid

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]
NO_PASSWD_UID = 4242


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAB_", "XDG_STATE_HOME", "HOME"))}
    return {**env, "OPENAB_ACP_AUTH_KEY": secrets.token_hex(32), **extra}


def _refused_in_one_line(argv: list[str], env: dict[str, str], *, says: str) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False, cwd="/")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert says in done.stderr and "OPENAB_STATE_DIR" in done.stderr, done.stderr


def test_a_read_only_home_says_what_to_mount(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "true"], capture_output=True, timeout=30, check=False).returncode != 0:
        pytest.skip("needs a private mount namespace (unshare -m)")
    home = tmp_path / "home"
    home.mkdir()
    read_only = ["unshare", "-m", "sh", "-c",
                 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"', str(home)]
    _refused_in_one_line([*read_only, *OPENAB, "run", "--port", "0"], _env(HOME=str(home)),
                         says=f"cannot write {home}/.local/state/openab (Read-only file system): the pod keeps its "
                              f"key and sessions there; mount a writable volume on HOME ({home})")
    # An explicit state dir on the read-only root is named itself.
    _refused_in_one_line([*read_only, *OPENAB, "run", "--port", "0", "--state-dir", str(home / "state")],
                         _env(HOME=str(tmp_path / "elsewhere")), says=f"mount a writable volume on {home / 'state'}")


def test_a_home_that_is_a_file_says_what_to_mount(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("")
    _refused_in_one_line([*OPENAB, "run", "--port", "0"], _env(HOME=str(home)),
                         says=f"(Not a directory): the pod keeps its key and sessions there; mount a writable "
                              f"volume on HOME ({home})")


def test_no_home_and_no_passwd_entry_says_what_to_set() -> None:
    if os.geteuid() != 0:
        pytest.skip("runs openab as another uid")
    openab = as_uid(NO_PASSWD_UID)
    if openab is None:
        pytest.skip("needs setpriv and a system Python of this venv's version")
    env = _env()
    env.pop("HOME", None)
    _refused_in_one_line([*openab, "run", "--port", "0"], env, says="no HOME to keep the pod's state in")
