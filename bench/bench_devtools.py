"""The developer's tools of issue 38, measured in real headless Chromium with the real extension and pod.

1. **Capture's cost**: a page load (``browser_navigate`` to tests/site/devtools.html, a page that logs, throws and
   fetches three times, to its load) with the console and network capture on, and with it off (the extension's
   ``openab.devCapture`` switch in its storage, set over the DevTools port between rounds), alternating in rounds in
   the same run. Target: the median with capture at most 10% over the median without.
2. **Tokens** (o200k_base, npm tiktoken): on that page, ``browser_console`` + ``browser_network`` against
   chrome-devtools-mcp 1.11.0's ``list_console_messages`` + ``list_network_requests``, attached to the same Chromium
   (its own tab). Target: at most the same, with what a developer needs in both (the uncaught error, the 404, the
   page's error line, the warning); and whether each shows the bearer token the page printed.
3. **A form of 8 fields**: ``browser_fill_form`` with 8 fields against 8 ``browser_type`` calls on
   tests/site/bench/form.html (time and calls, alternating in rounds).

Run: ``python bench/bench_devtools.py [--quick] [--out DIR]`` (from the repository, venv active, npm peers in
tests/bench).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from playwright.async_api import async_playwright

from bench.bench_browser_tools import Rig, browser_rig, call
from bench.bench_snapshot_tokens import count_tokens, devtools_mcp
from bench.common import arguments, summary, write_result

NAME = "devtools"
SWITCH = "openab.devCapture"
CAPTURE_TARGET = 1.10
# What a developer opens DevTools for on the page: each must be in a tool's answer.
NEEDED = {"uncaught error": "cannot render 2 orders", "the 404": "no-such-endpoint",
          "the page's error": "report answered", "the warning": "deprecated: use /api/v2",
          "the failing request's status": "404"}
TOKEN = "ghp_R8wq3ZQ7yXk2LmN5pT9vB4cD6fH1jK0sA3eG"
FIELDS = ("email", "phone", "first", "last", "street", "city", "zip", "notes")


async def set_capture(rig: Rig, on: bool) -> None:
    """The extension's capture switch, set in its own storage through its service worker."""
    async with async_playwright() as p:
        browser = await p.chromium.connect_over_cdp(rig.cdp)
        try:
            workers = [w for c in browser.contexts for w in c.service_workers if w.url.startswith("chrome-extension://")]
            if not workers:
                raise RuntimeError("the extension's service worker is not running")
            await workers[0].evaluate("(v) => chrome.storage.local.set({'openab.devCapture': v})", on)
        finally:
            # Leaves the browser running: this closes only Playwright's connection to it.
            await browser.close()


async def page_loads(rig: Rig, rounds: int, per_round: int) -> dict[str, list[float]]:
    url = f"{rig.site}/devtools.html"
    samples: dict[str, list[float]] = {"capture on": [], "capture off": []}
    order = ["capture on", "capture off"]
    for number in range(rounds):
        for side in order if number % 2 == 0 else reversed(order):
            await set_capture(rig, side == "capture on")
            await call(rig.client, "browser_navigate", {"url": url, "repeat": True})  # untimed: the switch lands
            for _ in range(per_round):
                start = time.perf_counter()
                await call(rig.client, "browser_navigate", {"url": url, "repeat": True})
                samples[side].append(time.perf_counter() - start)
    await set_capture(rig, True)
    return samples


def kept(text: str) -> dict[str, bool]:
    return {what: needle in text for what, needle in NEEDED.items()}


async def tokens(rig: Rig) -> dict[str, Any]:
    url = f"{rig.site}/devtools.html"
    # "repeat": the same navigation within 15 s is otherwise the pod's journal's to answer, with no load.
    await call(rig.client, "browser_navigate", {"url": url, "repeat": True})
    await call(rig.client, "browser_wait_for", {"text": "ready: 2 orders"})
    ours = [await call(rig.client, "browser_console"), await call(rig.client, "browser_network")]
    async with devtools_mcp(rig.cdp) as devtools:
        await call(devtools, "new_page", {"url": url})
        await call(devtools, "wait_for", {"text": ["ready: 2 orders"]})
        theirs = [await call(devtools, "list_console_messages"), await call(devtools, "list_network_requests")]
    counts = count_tokens([*ours, *theirs])
    texts = {"openab": ours, "chrome-devtools-mcp": theirs}
    mine, peer = sum(counts[:2]), sum(counts[2:])
    return {
        "openab": {"browser_console": counts[0], "browser_network": counts[1], "total": mine,
                   "kept": kept("\n".join(ours)), "shows the printed token": TOKEN in "\n".join(ours)},
        "chrome-devtools-mcp 1.11.0": {"list_console_messages": counts[2], "list_network_requests": counts[3],
                                       "total": peer, "kept": kept("\n".join(theirs)),
                                       "shows the printed token": TOKEN in "\n".join(theirs)},
        "ratio": round(mine / peer, 3), "met": mine <= peer and all(kept("\n".join(ours)).values()),
        "texts": texts,
    }


async def form_fill(rig: Rig, rounds: int) -> dict[str, Any]:
    url = f"{rig.site}/bench/form.html"
    fields = [{"selector": f"#{f}", "value": f"value {i}"} for i, f in enumerate(FIELDS)]
    samples: dict[str, list[float]] = {"browser_fill_form": [], "8 browser_type": []}

    async def one_call() -> None:
        await call(rig.client, "browser_fill_form", {"fields": fields, "repeat": True})

    async def eight_calls() -> None:
        for field in fields:
            args = {"selector": field["selector"], "text": field["value"], "repeat": True}
            await call(rig.client, "browser_type", args)

    paths = {"browser_fill_form": one_call, "8 browser_type": eight_calls}
    order = list(paths)
    for number in range(rounds):
        for name in order if number % 2 == 0 else reversed(order):
            await call(rig.client, "browser_navigate", {"url": url, "repeat": True})
            start = time.perf_counter()
            await paths[name]()
            samples[name].append(time.perf_counter() - start)
    one, eight = summary(samples["browser_fill_form"]), summary(samples["8 browser_type"])
    return {"browser_fill_form": {**one, "calls": 1}, "8 browser_type": {**eight, "calls": 8},
            "ratio_p50": round(one["p50_ms"] / eight["p50_ms"], 3)}


async def run(quick: bool, out: Path) -> Path:
    rounds, per_round = (2, 2) if quick else (12, 4)
    async with browser_rig() as rig:
        loads = await page_loads(rig, rounds, per_round)
        on, off = summary(loads["capture on"]), summary(loads["capture off"])
        load_ratio = round(on["p50_ms"] / off["p50_ms"], 3)
        capture = {"capture on": on, "capture off": off, "ratio_p50": load_ratio, "met": load_ratio <= CAPTURE_TARGET}
        counted = await tokens(rig)
        filled = await form_fill(rig, 2 if quick else 10)
    result = {
        "targets": {"capture": f"page load median with capture <= {CAPTURE_TARGET}x without, same run",
                    "tokens": "browser_console + browser_network <= chrome-devtools-mcp's two lists, "
                              "nothing needed lost"},
        "rounds": rounds, "per_round": per_round, "quick": quick,
        "page load (browser_navigate to tests/site/devtools.html)": capture,
        "tokens on tests/site/devtools.html (o200k_base)": counted,
        "a form of 8 fields (tests/site/bench/form.html)": filled,
    }
    return write_result(NAME, result, out)


def main(argv: Sequence[str] | None = None) -> Path:
    args: argparse.Namespace = arguments(__doc__.splitlines()[0] if __doc__ else NAME, argv)
    out: Path = args.out
    return asyncio.run(run(bool(args.quick), out))


if __name__ == "__main__":
    main()
