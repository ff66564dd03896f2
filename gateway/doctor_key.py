"""`openab doctor`'s checks of the `/acp` key and the metrics key, as `openab run` would read them.

The key the pod made itself is on disk only as a verifier (:mod:`.acp_key`), so the doctor checks that file (a
plain 0600 file of ours, in our format) and can compare a key it is given with it; it never has the key itself
unless it is given one. A plain ``acp.key`` an earlier openab kept is named: the next `openab run` upgrades it.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from openab_browser.core.settings import Settings

    from .acp_key import KeyVerifier

__all__ = ["Report", "check_key", "check_metrics_key"]


class Report(Protocol):
    """What the doctor's report (gateway/doctor_command.py) is to these checks: named by shape, so this module
    does not import the command that imports it."""

    secrets: list[str]

    def add(self, status: Literal["ok", "warn", "FAIL"], what: str, fix: str = "") -> None: ...


def check_key(settings: Settings, report: Report) -> str | None:
    """The key `openab run` would take, checked and returned when the doctor knows it (given, or in a file)."""
    from openab_browser.core.addresses import is_loopback
    from openab_browser.core.errors import ConfigurationError

    from .pairing import MIN_KEY_CHARS, read_key_file

    if settings.insecure_no_key:
        status: Literal["ok", "warn", "FAIL"] = "warn" if is_loopback(settings.host) else "FAIL"
        report.add(status, "key: none (--insecure-no-key): any local process can take a session",
                   "drop --insecure-no-key / OPENAB_INSECURE_NO_KEY; the pod then makes a key itself")
        return None
    if settings.token is not None:
        key = settings.token.get_secret_value()
        report.secrets.append(key)
        source = "OPENAB_ACP_AUTH_KEY"
        if settings.token_file is None:
            _compare_with_kept(settings, key, report)
    elif settings.token_file is not None:
        path = settings.token_file
        if not path.exists():
            report.add("FAIL", f"key: the key file {path} does not exist",
                       f"write one: `openssl rand -hex 32 > {path} && chmod 600 {path}`")
            return None
        try:
            key = read_key_file(path)
        except (ConfigurationError, OSError) as exc:
            report.add("FAIL", f"key: {exc}", f"`chmod 600 {path}`, owned by this user, at least {MIN_KEY_CHARS} "
                                              "random characters (`openssl rand -hex 32`)")
            return None
        report.secrets.append(key)
        source = str(path)
    else:
        kept = _check_kept(settings, report)
        if kept is None:
            return None
        key, source = kept
    distinct = len(set(key))
    if len(key) < MIN_KEY_CHARS or distinct < 8:
        report.add("FAIL", f"key: the key from {source} is weak ({len(key)} characters, {distinct} distinct)",
                   f"use at least {MIN_KEY_CHARS} random characters: `openssl rand -hex 32`")
    else:
        report.add("ok", f"key: {len(key)} characters, from {source}")
    return key


def _kept_verifier(settings: Settings) -> KeyVerifier | None:
    from openab_browser.core.errors import ConfigurationError

    from .acp_key import read_verifier, verifier_path

    path = verifier_path(settings.state_dir)
    if not os.path.lexists(path):
        return None
    try:
        return read_verifier(path)
    except ConfigurationError:
        return None  # said by _check_kept


def _compare_with_kept(settings: Settings, key: str, report: Report) -> None:
    from .acp_key import verifier_path

    verifier = _kept_verifier(settings)
    if verifier is None:
        return
    path = verifier_path(settings.state_dir)
    if verifier.matches(key):
        report.add("ok", f"key: OPENAB_ACP_AUTH_KEY is the key whose verifier the pod keeps in {path}")
    else:
        report.add("warn", f"key: OPENAB_ACP_AUTH_KEY is not the key whose verifier the pod keeps in {path}",
                   "a pod started with OPENAB_ACP_AUTH_KEY takes that key; one started without it takes the kept "
                   "one: pair the side panel with the key of the pod you run")


def _check_kept(settings: Settings, report: Report) -> tuple[str, str] | None:
    """The verifier of the key the pod made: its file's mode and form; and a plain key an earlier openab kept,
    returned with its file's name to be checked as a given key is."""
    from openab_browser.core.errors import ConfigurationError
    from openab_browser.core.statedir import KEYS_DIR, read_private_file

    from .acp_key import LEGACY_KEY_FILE, REMEDY, read_verifier, verifier_path

    path = verifier_path(settings.state_dir)
    plain = next((p for p in (settings.state_dir / KEYS_DIR / LEGACY_KEY_FILE, settings.state_dir / LEGACY_KEY_FILE)
                  if os.path.lexists(p)), None)
    if not os.path.lexists(path) and plain is None:
        report.add("ok", f"key: none kept yet; `openab run` makes one on first start and keeps only its verifier, "
                         f"in {path}")
        return None
    if os.path.lexists(path):
        try:
            verifier = read_verifier(path)
        except ConfigurationError as exc:
            report.add("FAIL", f"key: {exc}", REMEDY)
            return None
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        report.add("ok", f"key: kept only as a verifier (PBKDF2-SHA256, {verifier.iterations} iterations, mode "
                         f"{mode:04o}) in {path}; the key itself is on no disk")
    if plain is None:
        return None
    try:
        key = read_private_file(plain, what="the key file")
    except ConfigurationError as exc:
        report.add("FAIL", f"key: {exc}", f"remove {plain}: `openab run` keeps only a verifier now")
        return None
    report.secrets.append(key)
    report.add("warn", f"key: {plain} holds the key itself (an earlier openab kept it): a copy of it opens /acp",
               "start `openab run` once: it keeps only the key's verifier and removes the file, and the side panel "
               "stays paired")
    return key, str(plain)


def check_metrics_key(settings: Settings, key: str | None, report: Report) -> None:
    """The metrics key read as `openab run` reads it, compared with the ``/acp`` ``key`` and the kept verifier."""
    from pydantic import SecretStr

    from openab_browser.core.errors import ConfigurationError

    from .metrics import resolve_metrics_key

    if settings.metrics_token is None and settings.metrics_token_file is None:
        report.add("ok", "metrics key: none; /metrics takes the /acp key")
        return
    source = str(settings.metrics_token_file) if settings.metrics_token is None else "OPENAB_METRICS_KEY"
    if key is not None and settings.token is None:
        settings.token = SecretStr(key)
    kept = _kept_verifier(settings) if settings.token_file is None else None
    try:
        resolve_metrics_key(settings, kept)
    except (ConfigurationError, OSError) as exc:
        report.add("FAIL", f"metrics key: {exc}", "give /metrics a key of its own in a 0600 file "
                                                  "(`openssl rand -hex 32`), or a Kubernetes Secret's")
        return
    metrics_key = settings.metrics_token.get_secret_value() if settings.metrics_token is not None else ""
    report.secrets.append(metrics_key)
    report.add("ok", f"metrics key: {len(metrics_key)} characters, from {source}; /metrics takes it, not the /acp "
                     "key")
