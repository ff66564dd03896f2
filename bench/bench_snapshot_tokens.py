"""What the model reads: openab's browser_snapshot against @playwright/mcp's, same pages, same Chromium.

Four local pages (tests/site/bench/: a checkout form, a long article with inline links, a table of orders, a
task web app). openab's snapshot is the whole tool result as the agent gets it through the real pod (the
untrusted-content markers included); @playwright/mcp (npm, tests/bench/package.json) connects to the same
Chromium over its DevTools port and its browser_snapshot result is taken whole too. Both are counted in
characters and in tokens (npm `tiktoken`, o200k_base, offline, called from node: tests/bench/tokens.mjs).

Nothing an agent needs may be lost for the size: every visible interactive element of the page (counted in the
page itself) must carry a ref in both snapshots, and every word of the page's visible text must be in them
(``words_missing``). @playwright/mcp's "### Open tabs" section is left out of its count: it lists tabs that are
there only because both tools share this browser. The second figure is a second look after one change:
openab's ``browser_snapshot`` with ``since`` (only what changed) against @playwright/mcp's whole snapshot again.

Run: ``python bench/bench_snapshot_tokens.py [--quick] [--out DIR]`` (from the repository, venv active).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from mcp import Client, StdioServerParameters
from playwright.async_api import Page

from bench.bench_browser_tools import PAGES, browser_rig, call, playwright_page, ref_of
from bench.common import arguments, write_result

NAME = "snapshot_tokens"
TARGET = 0.6  # openab's tokens <= 0.6x @playwright/mcp's on every page
PEERS = Path(__file__).resolve().parent.parent / "tests" / "bench"
PLAYWRIGHT_MCP = PEERS / "node_modules" / "@playwright" / "mcp" / "cli.js"
TOKENS = PEERS / "tokens.mjs"
NODE = shutil.which("node") or "node"
# What an agent can act on, as the page itself has it: each visible one must have a ref in a snapshot.
INTERACTIVE = (
    "a[href], button, input:not([type=hidden]), select, textarea, summary, [contenteditable=''], "
    "[contenteditable=true], [role=button], [role=link], [role=checkbox], [role=radio], [role=tab], "
    "[role=menuitem], [role=switch], [role=textbox], [role=combobox], [role=option]"
)
# The lines of @playwright/mcp's snapshot that are interactive elements (it puts refs on every node): their roles,
# and a named `generic`, which is how it shows an editable region without a role. YAML quotes a line with a colon.
PLAYWRIGHT_INTERACTIVE = re.compile(
    r"^\s*- '?(link|button|textbox|searchbox|checkbox|radio|combobox|listbox|tab|menuitem|switch|option|slider|"
    r"spinbutton)\b.*\[ref=\w+\]|^\s*- '?generic \"[^\"]+\" \[ref=\w+\]", re.M
)
# On its own line "[ref=e12]", inside a line of text "[name](e12)" (or "[name](e12 https://other.site/x)").
OPENAB_REF = re.compile(r"(?:\bref=|\]\()e\d+\b")


def words_missing(page_text: str, snapshot: str) -> list[str]:
    """The page's visible words that a snapshot leaves out (case-insensitive), in page order, once each."""
    have = set(re.findall(r"\w+", snapshot.lower()))
    missing = [w for w in re.findall(r"\w+", page_text.lower()) if w not in have]
    return list(dict.fromkeys(missing))


def count_tokens(texts: Sequence[str]) -> list[int]:
    """o200k_base token counts from the npm tiktoken package (its encodings ship with it: no download)."""
    if not TOKENS.exists() or not (PEERS / "node_modules" / "tiktoken").exists():
        raise SystemExit(f"npm peers missing: (cd {PEERS} && npm ci)")
    done = subprocess.run([NODE, str(TOKENS)], input=json.dumps(list(texts)).encode(), capture_output=True,
                          timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"tokens.mjs failed: {done.stderr.decode(errors='replace')[:500]}")
    counts = json.loads(done.stdout)
    assert isinstance(counts, list) and len(counts) == len(texts)
    return [int(n) for n in counts]


@contextlib.asynccontextmanager
async def playwright_mcp(cdp: str) -> AsyncIterator[Client]:
    """@playwright/mcp over stdio, attached to the Chromium at `cdp`."""
    if not PLAYWRIGHT_MCP.exists():
        raise SystemExit(f"npm peers missing: (cd {PEERS} && npm ci)")
    # Its files (console logs, snapshots) go to a temporary folder, not the working tree.
    with tempfile.TemporaryDirectory(prefix="openab-playwright-mcp-") as output:
        args = [str(PLAYWRIGHT_MCP), "--cdp-endpoint", cdp, "--output-dir", output]
        async with Client(StdioServerParameters(command=NODE, args=args, cwd=output), mode="legacy") as client:
            yield client


def without_tab_list(text: str) -> str:
    """@playwright/mcp's result less its "### Open tabs" section: it lists the tabs that exist only because both
    tools share one browser here (openab's agent tab, the start page); alone it shows no such list."""
    return re.sub(r"^### Open tabs\n(?:- .*\n)*", "", text, flags=re.M)


async def page_facts(page: Page, url: str) -> tuple[int, str]:
    """How many interactive elements the page shows, counted in the page itself, and its visible text."""
    await page.goto(url)
    count = await page.evaluate(
        """(selector) => Array.from(document.querySelectorAll(selector)).filter((el) => !el.closest(
            '[aria-hidden=true],[hidden],[inert]') && el.checkVisibility({visibilityProperty: true})).length""",
        INTERACTIVE,
    )
    return int(count), str(await page.evaluate("() => document.body.innerText"))


async def snapshots(cdp: str, site: str, client: Client, page: Page) -> dict[str, dict[str, Any]]:
    """Per page: both snapshots' text and the page's own count of interactive elements."""
    out: dict[str, dict[str, Any]] = {}
    async with playwright_mcp(cdp) as peer:
        for name in PAGES:
            url = f"{site}/bench/{name}.html"
            await call(client, "browser_navigate", {"url": url})
            mine = await call(client, "browser_snapshot")
            await call(peer, "browser_navigate", {"url": url})
            theirs = without_tab_list(await call(peer, "browser_snapshot"))
            interactive, text = await page_facts(page, url)
            out[name] = {"openab": mine, "playwright_mcp": theirs, "interactive": interactive, "text": text}
        out["app, second look"] = await second_look(site, client, peer)
    return out


async def second_look(site: str, client: Client, peer: Client) -> dict[str, Any]:
    """The task app after one click (Add task opens a small form): openab's ``since`` against @playwright/mcp's
    whole snapshot, which is how it shows the page again."""
    url = f"{site}/bench/app.html"
    await call(client, "browser_navigate", {"url": url})
    before = await call(client, "browser_snapshot")
    await call(client, "browser_click", {"ref": ref_of(before, 'button "Add task"')})
    mine = await call(client, "browser_snapshot", {"since": True})
    await call(peer, "browser_navigate", {"url": url})
    theirs_before = await call(peer, "browser_snapshot")
    add = re.search(r'button "Add task" \[ref=(\w+)\]', theirs_before)
    if add is None:
        raise RuntimeError(f"no Add task button in @playwright/mcp's snapshot:\n{theirs_before[:2000]}")
    await call(peer, "browser_click", {"element": "Add task button", "target": add.group(1)})
    theirs = without_tab_list(await call(peer, "browser_snapshot"))
    return {"openab": mine, "playwright_mcp": theirs, "interactive": 0, "text": ""}


# @playwright/mcp writes its refs "e12" on the first page it snapshots and "f1e12", "f2e12", ... on each page after
# (a counter of the frames it has met, in a browser of its own too). Here the form is sometimes the first page it
# meets and sometimes not, so its figure is also given with every ref spelled as on a first page.
PLAYWRIGHT_FRAME_PREFIX = re.compile(r"\[ref=f\d+e")


def figures(texts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    flat = [x for p in texts for x in (texts[p]["openab"], texts[p]["playwright_mcp"], texts[p]["text"],
                                       PLAYWRIGHT_FRAME_PREFIX.sub("[ref=e", texts[p]["playwright_mcp"]))]
    tokens = iter(count_tokens(flat))
    pages: dict[str, Any] = {}
    for name, t in texts.items():
        mine, theirs, floor, plain = next(tokens), next(tokens), next(tokens), next(tokens)
        prefix = PLAYWRIGHT_FRAME_PREFIX.search(t["playwright_mcp"])
        if not t["text"]:  # a second look: sizes only
            pages[name] = {
                "chars": {"openab": len(t["openab"]), "playwright_mcp": len(t["playwright_mcp"]),
                          "ratio": round(len(t["openab"]) / len(t["playwright_mcp"]), 3)},
                "tokens": {"openab": mine, "playwright_mcp": theirs, "ratio": round(mine / theirs, 3)},
            }
            continue
        refs = len(OPENAB_REF.findall(t["openab"]))
        peer_refs = len(PLAYWRIGHT_INTERACTIVE.findall(t["playwright_mcp"]))
        pages[name] = {
            "chars": {"openab": len(t["openab"]), "playwright_mcp": len(t["playwright_mcp"]),
                      "ratio": round(len(t["openab"]) / len(t["playwright_mcp"]), 3)},
            "tokens": {"openab": mine, "playwright_mcp": theirs, "ratio": round(mine / theirs, 3)},
            "playwright_mcp_refs": "f<N>e12" if prefix else "e12",
            "tokens_refs_as_on_a_first_page": {"playwright_mcp": plain, "ratio": round(mine / plain, 3)},
            # The page's visible text alone: no snapshot that keeps all of it can be smaller.
            "text_floor": {"tokens": floor, "ratio": round(floor / theirs, 3)},
            "interactive_in_page": t["interactive"],
            "refs": {"openab": refs, "playwright_mcp_interactive": peer_refs},
            # Nothing an agent needs lost: a ref on every control, and every word the page shows.
            "words_missing": {"openab": words_missing(t["text"], t["openab"])[:20],
                              "playwright_mcp": words_missing(t["text"], t["playwright_mcp"])[:20]},
            "nothing_lost": refs >= t["interactive"] and not words_missing(t["text"], t["openab"]),
            "met": mine / theirs <= TARGET and refs >= t["interactive"] and not words_missing(t["text"], t["openab"]),
        }
    return pages


async def run(quick: bool, out: Path) -> Path:
    async with browser_rig() as rig, playwright_page(rig.cdp) as page:
        texts = await snapshots(rig.cdp, rig.site, rig.client, page)
    pages = figures(texts)
    result = {
        "target": f"openab's snapshot <= {TARGET}x @playwright/mcp's tokens on every page, a ref on every "
                  "interactive element in both",
        "tokenizer": "tiktoken (npm) o200k_base",
        "quick": quick,
        "pages": pages,
    }
    path = write_result(NAME, result, out)
    plot_sizes(pages, out)
    return path


def plot_sizes(pages: dict[str, Any], out: Path) -> Path | None:
    """Tokens per page, both snapshots and the page's text alone, as ``<out>/snapshot_tokens.png``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -e '.[dev]')", file=sys.stderr)
        return None
    names = list(pages)
    bars = {
        "@playwright/mcp browser_snapshot": [pages[n]["tokens"]["playwright_mcp"] for n in names],
        "openab browser_snapshot": [pages[n]["tokens"]["openab"] for n in names],
        "the page's visible text alone": [pages[n].get("text_floor", {}).get("tokens", 0) for n in names],
    }
    figure, axes = plt.subplots(figsize=(7, 4), dpi=110)
    width = 0.8 / len(bars)
    for i, (label, values) in enumerate(bars.items()):
        axes.bar([x + i * width for x in range(len(names))], values, width, label=label)
    axes.set_xticks([x + width for x in range(len(names))], names)
    axes.set_ylabel("tokens (o200k_base)")
    axes.set_title("What the model reads: one snapshot of each page")
    axes.legend()
    figure.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{NAME}.png"
    figure.savefig(path)
    plt.close(figure)
    return path


def main(argv: Sequence[str] | None = None) -> Path:
    args = arguments(__doc__.splitlines()[0] if __doc__ else NAME, argv)
    out: Path = args.out
    return asyncio.run(run(bool(args.quick), out))


if __name__ == "__main__":
    main()
