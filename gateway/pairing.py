"""The `/acp` key when the operator gave none (made once, kept 0600 in the state dir) and the pairing text.

A pod never runs keyless by default: any local process could otherwise take a person's live session. Like
Jupyter's token, the key is shown once: on the start that made it, and only when stderr is a terminal, where
a person reads it. In a container stderr is the collected log, so there, and on every later start, the pairing
text says where the key is kept instead. The URL it names is the one the person enters in the side panel:
``wss://`` with the pod's own TLS, ``--public-url`` behind an ingress (which only the operator knows).
"""

from __future__ import annotations

import secrets
import socket
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from openab.core.addresses import is_loopback
from openab.core.errors import ConfigurationError
from openab.core.statedir import (
    kept_secret_path,
    load_or_create_secret,
    make_private_dir,
    move_kept_secret,
    read_secret_file,
)

if TYPE_CHECKING:
    from openab.core.settings import Settings

    from .pair_link import PairCodes

__all__ = [
    "KEY_FILE", "MIN_KEY_CHARS", "KeptKey", "gateway_url", "kept_key_path", "load_or_create_key", "make_private_dir",
    "pair_link", "pairing_lines", "read_key_file",
]

KEY_FILE = "acp.key"
# 128 bits as hex; a token_urlsafe(32) key (what we make) is 43 characters, 256 bits.
MIN_KEY_CHARS = 32
# Several words, so the panel, which takes a pasted "Gateway URL:" line's single word, fills in no URL from it.
INGRESS_URL = "the ingress's wss:// address"


class KeptKey(NamedTuple):
    """The key the pod keeps itself: its file, and whether this start made it."""

    path: Path
    new: bool


def read_key_file(path: Path) -> str:
    """The key in ``path`` (a plain 0600 file, or a Kubernetes Secret's; see ``read_secret_file``), 128 bits or more."""
    return _strong(path, read_secret_file(path, what="the key file"))


def kept_key_path(state_dir: Path) -> Path:
    """Where the pod keeps the key it made: ``<state dir>/keys/acp.key`` (see ``kept_secret_path``)."""
    return kept_secret_path(state_dir, KEY_FILE)


def load_or_create_key(state_dir: Path) -> tuple[str, bool]:
    """The pod's kept key, made now (256 bits) if there is none; returns it and whether it is new."""
    path = move_kept_secret(state_dir, KEY_FILE)
    key, new = load_or_create_secret(path, lambda: secrets.token_urlsafe(32), what="the key file")
    return _strong(path, key), new


def _strong(path: Path, key: str) -> str:
    if len(key) < MIN_KEY_CHARS:
        raise ConfigurationError(
            f"the key in {path} is {len(key)} characters; it needs at least {MIN_KEY_CHARS} "
            "(e.g. `openssl rand -hex 32`)"
        )
    return key


def gateway_url(settings: Settings) -> tuple[str | None, str]:
    """The URL a person enters in the side panel for this pod (``None``: only the operator knows it, behind an
    ingress without ``--public-url``), and what to know about it ("" when nothing)."""
    if settings.public_url is not None:
        return settings.public_url, ""
    if settings.behind_proxy:
        return None, "ending /acp; give --public-url (OPENAB_PUBLIC_URL) to print it here"
    wildcard = settings.host in ("0.0.0.0", "::", "")
    if settings.tls_cert is not None:
        host = socket.gethostname() if wildcard else settings.host
        note = ("or the name its certificate is for, if that is another: --public-url prints it here"
                if wildcard else "")
        return f"wss://{_url_host(host)}:{settings.port}/acp", note
    if wildcard:  # --insecure-no-tls: a container's port published on the person's own loopback
        return (f"ws://127.0.0.1:{settings.port}/acp",
                "where this port is published on the person's loopback; the panel takes ws:// there only")
    note = "" if is_loopback(settings.host) else (
        "the panel takes ws:// on loopback only: reach this port through a loopback tunnel, or serve TLS")
    return f"ws://{_url_host(settings.host)}:{settings.port}/acp", note


def pair_link(url: str, code: str) -> str:
    """The one-click pairing link for the gateway at ``url`` (``wss://host/acp``): the same host's ``/pair`` page
    (``http`` where the panel dials ``ws``, i.e. on loopback), the code in the fragment, which no request carries."""
    scheme, _, rest = url.partition("://")
    base = rest.removesuffix("/acp")
    return f"{'https' if scheme == 'wss' else 'http'}://{base}/pair#code={code}"


def pairing_lines(settings: Settings, kept: KeptKey | None, *, terminal: bool,
                  codes: PairCodes | None = None) -> list[str]:
    """What the person pastes into the side panel's settings: the URL, and the key itself only when this start
    made it and ``terminal`` (stderr is one); otherwise where the key is. No line holds a key the pod did not
    just make, so with ``terminal`` false none holds one at all.

    With ``codes`` and ``terminal``, and a URL to name, a last line holds the pairing link instead of pasting (a
    new code from ``codes``, one use, for a few minutes): never in a log, since the link claims the key."""
    url, note = gateway_url(settings)
    lines = _url_and_key_lines(settings, kept, terminal=terminal, url=url, note=note)
    # Only a URL the panel dials gets a link: wss://, or ws:// on loopback (the link's page is then http://).
    usable = url is not None and (url.startswith("wss://") or is_loopback(urlsplit(url).hostname or ""))
    if codes is not None and terminal and url is not None and usable:
        lines.append(f"Or open this link once in that Chrome (one use, {codes.ttl / 60:g} minutes): "
                     f"{pair_link(url, codes.issue(url))}")
    return lines


def _url_and_key_lines(settings: Settings, kept: KeptKey | None, *, terminal: bool, url: str | None,
                       note: str) -> list[str]:
    lines = [f"Gateway URL: {url or INGRESS_URL}"]
    if note:
        lines.append(f"  ({note})")
    if kept is not None and kept.new and terminal and settings.token is not None:
        lines += [f"Key:         {settings.token.get_secret_value()}",
                  f"Treat the key like a password (kept in {kept.path})."]
    elif kept is not None:
        why = "it was made at an earlier start" if not kept.new else "stderr is not a terminal, it may be a log"
        lines.append(f"Key:         not printed ({why}): read it from {kept.path} on the pod")
    elif settings.insecure_no_key:
        lines.append("Key:         none (--insecure-no-key)")
    elif settings.token_file is not None:
        lines.append(f"Key:         the one in {settings.token_file}")
    else:
        lines.append("Key:         the one in OPENAB_ACP_AUTH_KEY")
    return lines


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
