"""What tests/test_mcp_config.py and tests/test_mcp_config_refusals.py share: the endpoints an entry names, the
folders a writer is given, and reading a written file back with a real parser for its format."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, TypedDict

import pytest

from openab_browser.core.agents.config import (
    HttpEndpoint,
    StdioCommand,
    config_files,
    goose_yaml,
)

PROXY = HttpEndpoint("http://127.0.0.1:41234/mcp", "s3cret-token")
BRIDGE = StdioCommand()
ENDPOINTS = [pytest.param(PROXY, id="proxy"), pytest.param(BRIDGE, id="bridge")]


class Dirs(TypedDict):
    """The ``dir`` and ``home`` keyword arguments every writer takes, passed as ``**dirs``."""

    dir: Path
    home: Path


@pytest.fixture(name="dirs")  # a module takes it by importing dirs_fixture; its tests ask for ``dirs``
def dirs_fixture(tmp_path: Path) -> Dirs:
    return {"dir": tmp_path / "project", "home": tmp_path / "home"}


def main_file(agent: str, dirs: Dirs) -> Path:
    return config_files(agent, **dirs)[0].path


def read(path: Path) -> dict[str, Any]:
    """Parse a written file back with a real parser for its format."""
    text = path.read_text()
    if path.suffix == ".toml":
        return tomllib.loads(text)
    if path.suffix == ".yaml":
        return dict(goose_yaml.load(text))  # no YAML library in our deps; see test_goose_*
    return json.loads(text)  # type: ignore[no-any-return]


def servers(agent: str, dirs: Dirs) -> dict[str, Any]:
    spec = config_files(agent, **dirs)[0]
    return dict(read(spec.path).get(spec.servers_key, {}))


def seed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


USER_SERVERS = {"playwright": {"command": "npx", "args": ["@playwright/mcp"]}}  # a server of the user's own
