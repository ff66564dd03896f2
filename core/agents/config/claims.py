"""Which session's entry each agent config file holds, so two live sessions never share one file.

Two agents reading one file would each see the other's browser (or each strip the other's entry on close):
a claim is taken when a session's entry is written and given up when it is stripped, and a write into a file
another session holds is refused with :class:`openab_browser.core.errors.ConfigConflict`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigConflict, ConfigError
from ...mcp.access import Entry
from . import config_files, strip, write

__all__ = ["ConfigClaims"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Written:
    """One write: what to strip when the session gives its claim up."""

    agent: str
    entry: Entry
    workdir: Path
    home: Path | None
    env: dict[str, str] | None
    paths: tuple[Path, ...]


class ConfigClaims:
    """The config files this pod wrote our entry into, by session. Not thread-safe: one per event loop."""

    def __init__(self) -> None:
        self._owners: dict[Path, str] = {}
        self._written: dict[str, list[_Written]] = {}

    def write(
        self, session_id: str, agent: str, entry: Entry, workdir: Path, *, home: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> list[Path]:
        """Write ``entry`` into ``agent``'s config under ``workdir`` (user files under ``home``, or where the
        agent's ``env`` points: ``CODEX_HOME`` and the like) and claim those files for ``session_id``.

        Raises :class:`ConfigConflict` when another session's entry is in one of them: give each session's
        agent its own working directory (and home) instead.
        """
        paths = tuple(Path(f.path).resolve() for f in config_files(agent, dir=workdir, home=home, env=env))
        for path in paths:
            owner = self._owners.get(path)
            if owner is not None and owner != session_id:
                raise ConfigConflict(
                    f"{path} already holds the openab_browser entry of session {owner}; two sessions cannot share "
                    f"one config file. Run each session's agent in its own working directory (and HOME)"
                )
        written = write(agent, entry, dir=workdir, home=home, env=env)
        for path in paths:
            self._owners[path] = session_id
        kept_env = dict(env) if env is not None else None
        self._written.setdefault(session_id, []).append(_Written(agent, entry, workdir, home, kept_env, paths))
        return written

    def release(self, session_id: str) -> None:
        """Strip the session's entries (ours only; the rest of each file stays) and give up its claims."""
        for done in self._written.pop(session_id, []):
            try:
                strip(done.agent, done.entry, dir=done.workdir, home=done.home, env=done.env)
            except (ConfigError, OSError) as exc:
                log.warning("could not remove the openab_browser entry of session %s: %s", session_id, exc)
            for path in done.paths:
                if self._owners.get(path) == session_id:
                    del self._owners[path]

    def holder(self, path: Path) -> str | None:
        """The session whose entry ``path`` holds, if any."""
        return self._owners.get(path.resolve())
