"""The `/acp` key when the operator gave none (made once, only its verifier kept: :mod:`.acp_key`) and the
pairing text.

A pod never runs keyless by default: any local process could otherwise take a person's live session. Like
Jupyter's token, the key is shown once: on the start that made it, and only when stderr is a terminal, where
a person reads it. The pod keeps no copy of it, so in a container (stderr is the collected log) and on every
later start the pairing text says that `openab key rotate` makes a new one, printed once to the operator's
terminal. The URL it names is the one the person enters in the side panel: ``wss://`` with the pod's own TLS,
``--public-url`` behind an ingress (which only the operator knows).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from openab_browser.core.addresses import is_loopback
from openab_browser.core.errors import ConfigurationError
from openab_browser.core.statedir import make_private_dir, read_secret_file

from .acp_key import KeptVerifier, settle_kept_key

if TYPE_CHECKING:
    from pydantic import SecretStr

    from openab_browser.core.settings import Settings

    from .pair_link import PairCodes

__all__ = [
    "MIN_KEY_CHARS", "KeptKey", "gateway_url", "keep_key", "make_private_dir", "pair_link", "pairing_lines",
    "read_key_file",
]

# 128 bits as hex; a token_urlsafe(32) key (what we make) is 43 characters, 256 bits.
MIN_KEY_CHARS = 32
# Several words, so the panel, which takes a pasted "Gateway URL:" line's single word, fills in no URL from it.
INGRESS_URL = "the ingress's wss:// address"


class KeptKey(NamedTuple):
    """The key the pod keeps itself: its verifier's file, the pod's door that compares with it, the key when this
    start made it (the pod's only copy, in memory: shown once and claimed by a pairing link, never written), and
    whether this start upgraded a plain key an earlier openab kept."""

    path: Path
    verifier: KeptVerifier
    key: SecretStr | None = None
    upgraded: bool = False

    @property
    def new(self) -> bool:
        return self.key is not None


def read_key_file(path: Path) -> str:
    """The key in ``path`` (a plain 0600 file, or a Kubernetes Secret's; see ``read_secret_file``), 128 bits or more."""
    return _strong(path, read_secret_file(path, what="the key file"))


def keep_key(state_dir: Path) -> KeptKey:
    """The pod's kept key at start (:func:`.acp_key.settle_kept_key`): made now if there is none, a plain one an
    earlier openab kept upgraded to a verifier, else the verifier alone."""
    from pydantic import SecretStr

    settled = settle_kept_key(state_dir, strong=MIN_KEY_CHARS)
    key = SecretStr(settled.key) if settled.key is not None else None
    return KeptKey(settled.path, KeptVerifier(settled.path), key, settled.upgraded)


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
    # And only a key the pod knows: on a later start it holds the verifier alone, and a link would claim nothing.
    known = kept is None or kept.key is not None
    if codes is not None and terminal and url is not None and usable and known:
        lines.append(f"Or open this link once in that Chrome (one use, {codes.ttl / 60:g} minutes): "
                     f"{pair_link(url, codes.issue(url))}")
    return lines


def _url_and_key_lines(settings: Settings, kept: KeptKey | None, *, terminal: bool, url: str | None,
                       note: str) -> list[str]:
    lines = [f"Gateway URL: {url or INGRESS_URL}"]
    if note:
        lines.append(f"  ({note})")
    if kept is not None and kept.key is not None and terminal:
        lines += [f"Key:         {kept.key.get_secret_value()}",
                  "Treat the key like a password: it is shown this once and kept nowhere (the pod keeps only its "
                  f"verifier, {kept.path})."]
    elif kept is not None:
        why = ("it was made at an earlier start" if kept.key is None
               else "stderr is not a terminal, it may be a log")
        lines.append(f"Key:         not printed ({why}) and not kept (only its verifier is, in {kept.path}): "
                     f"`openab key rotate --state-dir {settings.state_dir}` makes a new one and prints it once")
    elif settings.insecure_no_key:
        lines.append("Key:         none (--insecure-no-key)")
    elif settings.token_file is not None:
        lines.append(f"Key:         the one in {settings.token_file}")
    else:
        lines.append("Key:         the one in OPENAB_ACP_AUTH_KEY")
    return lines


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
