"""extension/lib/protocol.js: the waits and ``_meta`` keys the pod and the extension share, each written once.

The pod's constants are the file's JSON object (core/protocol_file.py), the extension's are the same module as node
runs it, neither language spells one of those keys or waits anywhere else, and a broken file stops the pod with what
to do. The extension keeps its chat across a browser restart with it (tests/browser/test_steps.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from openab_browser.core import META_PREFIX
from openab_browser.core.acp import schema
from openab_browser.core.protocol_file import CARD_WAIT, META, PROMPT_WAIT, PROTOCOL_PATH, read_protocol
from openab_browser.core.settings import PANEL_PROMPT_WAIT, Settings

ROOT = Path(__file__).resolve().parent.parent
FILE = read_protocol((ROOT / "extension" / "lib" / "protocol.js").read_text())


def test_the_pod_reads_the_file() -> None:
    assert PROTOCOL_PATH == ROOT / "extension" / "lib" / "protocol.js"
    assert (PANEL_PROMPT_WAIT, Settings.from_env({}).permission_timeout) == (
        FILE["waits"]["promptSeconds"], FILE["waits"]["cardSeconds"])
    assert (PROMPT_WAIT, CARD_WAIT) == (1800.0, 300.0)
    assert dict(META) == FILE["meta"]
    told = (schema.STOPPED_META, schema.AGENT_META, schema.FRESH_META)
    assert told == (FILE["meta"]["stopped"], FILE["meta"]["agent"], FILE["meta"]["fresh"])


def test_the_extension_reads_the_same_file() -> None:
    script = ("import { META, PROMPT_WAIT_MS, CARD_WAIT_MS } from './lib/protocol.js';"
              "console.log(JSON.stringify({ meta: META, prompt: PROMPT_WAIT_MS, card: CARD_WAIT_MS }));")
    ran = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ROOT / "extension",
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    said = json.loads(ran.stdout)
    assert said == {"meta": FILE["meta"], "prompt": PROMPT_WAIT * 1000, "card": CARD_WAIT * 1000}


def test_no_key_or_wait_of_the_file_is_spelled_anywhere_else() -> None:
    keys = set(FILE["meta"].values())
    python = [p for folder in ("core", "gateway", "bridge") for p in (ROOT / folder).rglob("*.py")]
    scripts = [p for p in (ROOT / "extension").rglob("*.js") if "node_modules" not in p.parts and p != PROTOCOL_PATH]
    spelled = []
    for path in (*python, *scripts):
        text = path.read_text()
        for key in keys:
            suffix = key.removeprefix(META_PREFIX)
            if re.search(rf"""['"]{re.escape(key)}['"]|META_PREFIX \+ ['"]{re.escape(suffix)}['"]""", text):
                spelled.append(f"{path.relative_to(ROOT)}: {key}")
    waits = re.compile(r"\b(?:30 \* 60_000|5 \* 60_000|1_?800_?000|300_?000)\b")
    spelled += [f"{p.relative_to(ROOT)}: a wait in milliseconds" for p in scripts if waits.search(p.read_text())]
    assert not spelled, spelled


def test_a_broken_file_stops_the_pod_saying_to_reinstall(tmp_path: Path) -> None:
    good = PROTOCOL_PATH.read_text()
    (tmp_path / "lib").mkdir()
    for text in (good.replace("/* JSON */", "", 1), good.replace('"dev.openab/guard"', '"x-guard"'),
                 good.replace('"promptSeconds": 1800', '"promptSeconds": 10'), good.replace('",\n', '"\n', 1)):
        assert text != good
        (tmp_path / "lib" / "protocol.js").write_text(text)
        code = ("import pathlib, openab_browser.core.catalogue as c;"
                f"c.CATALOGUE_PATH = pathlib.Path({str(tmp_path / 'catalogue.json')!r});"
                "import openab_browser.core.protocol_file")
        ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert ran.returncode != 0 and "InstallationError" in ran.stderr and "reinstall" in ran.stderr, ran.stderr


@pytest.mark.parametrize("name", sorted(FILE["meta"]))
def test_every_key_is_ours(name: str) -> None:
    assert FILE["meta"][name].startswith(META_PREFIX)
