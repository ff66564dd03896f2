"""The CI-sized runs of bench/bench_browser_tools.py and bench/bench_snapshot_tokens.py: they still run end to end
(real pod, real extension in Chromium, Playwright and @playwright/mcp on the same browser) and write sane JSON.
No thresholds: the figures are the full runs' (docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser.harness import CHROMIUM

from bench import bench_browser_tools, bench_snapshot_tokens

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="Debian chromium is not installed: apt-get install chromium")


def test_browser_tools_quick_run_writes_every_tool_for_both_sides(tmp_path: Path) -> None:
    path = bench_browser_tools.main(["--quick", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    assert result["benchmark"] == "browser_tools" and result["quick"] is True
    assert set(result["tools"]) == set(bench_browser_tools.TOOLS)
    assert {"navigate", "snapshot", "click", "click, a turn apart", "type", "screenshot"} <= set(result["tools"])
    for tool, figures in result["tools"].items():
        for side in ("openab", "playwright"):
            assert figures[side]["n"] >= 2, tool
            assert 0 < figures[side]["p50_ms"] <= figures[side]["p99_ms"] < 60_000, (tool, side)
        assert figures["ratio"]["p50"] > 0
    assert result["machine"]["load_average"]
    assert (tmp_path / "browser_tools.png").stat().st_size > 1000


def test_snapshot_tokens_quick_run_counts_both_snapshots_of_every_page(tmp_path: Path) -> None:
    path = bench_snapshot_tokens.main(["--quick", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    pages = result["pages"]
    assert set(pages) == {"form", "article", "table", "app", "app, second look"}
    # After one click, the changes alone are a fraction of a whole snapshot.
    assert pages["app, second look"]["tokens"]["openab"] < pages["app"]["tokens"]["openab"] / 2
    for name in ("form", "article", "table", "app"):
        page = pages[name]
        for unit in ("chars", "tokens"):
            assert page[unit]["openab"] > 0 and page[unit]["playwright_mcp"] > 0, (name, unit)
        # Tokens are fewer than characters; the page's text alone is less than a snapshot that holds it.
        assert page["tokens"]["openab"] < page["chars"]["openab"]
        assert 0 < page["text_floor"]["tokens"] < page["tokens"]["playwright_mcp"]
        assert page["interactive_in_page"] > 0 and isinstance(page["nothing_lost"], bool)
    assert (tmp_path / "snapshot_tokens.png").stat().st_size > 1000


@pytest.mark.parametrize("words, again", [
    # As Playwright put it in a CI run of the token bench (its call log kept).
    ('Page.goto: Navigation to "http://127.0.0.1:37067/bench/article.html" is interrupted by another navigation to '
     '"http://127.0.0.1:37067/bench/article.html"\nCall log:\n  - navigating to "http://127.0.0.1:37067/bench/'
     'article.html", waiting until "load"\n', True),
    ('Navigation to "http://127.0.0.1:1/a.html" is interrupted by another navigation to "http://127.0.0.1:1/b.html"',
     False),
    ("Page.goto: net::ERR_CONNECTION_REFUSED at http://127.0.0.1:37067/bench/article.html", False),
    ("Timeout 30000ms exceeded.", False),
])
def test_the_token_bench_goes_again_only_where_a_navigation_was_interrupted_by_itself(words: str, again: bool) -> None:
    # The one race it tries a second time; any other failure, another page's navigation included, fails the run.
    assert bench_snapshot_tokens.interrupted_by_itself(RuntimeError(words)) is again
