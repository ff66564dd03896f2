"""The `/acp` key when the operator gave none: made once, kept 0600 in the state dir, shown as a pairing line.

A pod never runs keyless by default: any local process could otherwise take a person's live session. Like
Jupyter's token, the key is printed once at start (to the terminal, never to the log) for the person to
paste into the side panel; it is kept so a restarted pod pairs with the same panel.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from openab.core.errors import ConfigurationError
from openab.core.statedir import load_or_create_secret, make_private_dir, read_secret_file

__all__ = ["KEY_FILE", "MIN_KEY_CHARS", "load_or_create_key", "make_private_dir", "pairing_lines", "read_key_file"]

KEY_FILE = "acp.key"
# 128 bits as hex; a token_urlsafe(32) key (what we make) is 43 characters, 256 bits.
MIN_KEY_CHARS = 32


def read_key_file(path: Path) -> str:
    """The key in ``path`` (a plain 0600 file, or a Kubernetes Secret's; see ``read_secret_file``), 128 bits or more."""
    return _strong(path, read_secret_file(path, what="the key file"))


def load_or_create_key(state_dir: Path) -> tuple[str, bool]:
    """The pod's kept key, made now (256 bits) if there is none; returns it and whether it is new."""
    path = state_dir / KEY_FILE
    key, new = load_or_create_secret(path, lambda: secrets.token_urlsafe(32), what="the key file")
    return _strong(path, key), new


def _strong(path: Path, key: str) -> str:
    if len(key) < MIN_KEY_CHARS:
        raise ConfigurationError(
            f"the key in {path} is {len(key)} characters; it needs at least {MIN_KEY_CHARS} "
            "(e.g. `openssl rand -hex 32`)"
        )
    return key


def pairing_lines(ws_url: str, key: str, *, key_file: Path | None) -> str:
    """What the person pastes into the side panel's settings, printed to the terminal only."""
    where = f" (kept in {key_file})" if key_file is not None else ""
    return (
        "\n  Pair the openab side panel with this pod (Settings):\n"
        f"    Gateway URL: {ws_url}\n"
        f"    Key:         {key}\n"
        f"  Treat the key like a password{where}.\n"
    )
