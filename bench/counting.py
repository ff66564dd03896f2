"""What bench/bench_snapshot_tokens.py counts on a page of its real-page corpus (issue 23), apart from tokens: the
page's tables as the page itself has them, the cells a snapshot ties to their column headers, the share of the
page's words it keeps, and the note by which openab's snapshot says there is more. Plain functions of texts, so
tests/test_bench_corpus.py checks them without a browser."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["NEXT_OFFSET", "PAGE_TABLES", "row_units", "tied_cells", "words_kept"]

# openab's paging note: "[characters 0-40000 of 91234. Call again with offset=40000 for more.]"
NEXT_OFFSET = re.compile(r"[Cc]all again with offset=(\d+)")
# The page's visible tables as the page itself has them: each as the texts of its column headers (its first row
# of th cells, a colspan spread over the columns it covers) and of its body rows' cells.
PAGE_TABLES = """() => {
  const shown = (el) => !el.closest('[aria-hidden=true],[hidden],[inert]') &&
    el.checkVisibility({visibilityProperty: true});
  const norm = (s) => s.replace(/\\s+/g, ' ').trim();
  const spread = (cells) => Array.from(cells).flatMap((c) => {
    const value = shown(c) ? norm(c.innerText) : '';
    return [value, ...Array(Math.max(0, c.colSpan - 1)).fill('')];
  });
  const tables = [];
  for (const table of document.querySelectorAll('table')) {
    if (!shown(table)) continue;
    const rows = Array.from(table.rows).filter((r) => shown(r) && r.closest('table') === table);
    const head = rows.find((r) => r.cells.length && Array.from(r.cells).every((c) => c.tagName === 'TH'));
    if (!head) continue;
    const body = rows.filter((r) => r !== head && !r.closest('thead')).map((r) => spread(r.cells));
    tables.push({ headers: spread(head.cells), rows: body });
  }
  return tables;
}"""


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _subsequence(have: Sequence[str], wanted: Sequence[str], start: int = 0) -> int:
    """Where ``wanted``'s words end in ``have`` when they all come in order from ``start`` (other words may be
    between them: an outline puts a cell's link or code in lines of its own); -1 where they do not."""
    at = start
    for word in wanted:
        try:
            at = have.index(word, at) + 1
        except ValueError:
            return -1
    return at


def _labelled(have: Sequence[str], label: Sequence[str], value: Sequence[str], gap: int = 0) -> bool:
    """Whether ``have`` holds ``label``'s words together, then (within ``gap`` words) ``value``'s words together:
    ``Customer: Ada Lovelace``, ``customer=Ada``."""
    n, m = len(label), len(value)
    for i in range(len(have) - n + 1):
        if list(have[i:i + n]) != list(label):
            continue
        for j in range(i + n, min(i + n + gap, len(have) - m) + 1):
            if list(have[j:j + m]) == list(value):
                return True
    return False


# A line that opens a table row in an outline: `- row ...` (@playwright/mcp, openab) or `uid=1_5 row ...`
# (chrome-devtools-mcp); the lines indented under it are the row's.
ROW_LINE = re.compile(r"^(\s*)(?:- )?(?:uid=\S+ )?'?row\b")


def row_units(snapshot: str) -> list[tuple[bool, list[str]]]:
    """The snapshot's units a table row can be read from, as (is one line, its words): every line alone, and
    every row line together with the lines indented under it (a row whose cells are on lines of their own)."""
    lines = snapshot.splitlines()
    units = [(True, _words(line)) for line in lines]
    for i, line in enumerate(lines):
        opened = ROW_LINE.match(line)
        if not opened:
            continue
        depth, j = len(opened.group(1)), i + 1
        while j < len(lines) and len(lines[j]) - len(lines[j].lstrip()) > depth:
            j += 1
        if j > i + 1:
            units.append((False, _words("\n".join(lines[i:j]))))
    return units


def tied_cells(tables: Sequence[dict[str, Any]], snapshot: str) -> dict[str, int]:
    """How many of the page's visible table cells a snapshot ties to their column's header.

    A body cell counts where its column has a header with words and the cell has words (an empty cell, a "-",
    or a column of checkboxes with no header word has nothing to tie). Texts are compared as their words, case
    ignored. A cell is tied when (a) one line of the snapshot holds its column's header and right after it its
    value (``Customer: Ada``, ``customer=Ada``), or (b) one unit of the snapshot (a line, or a row line
    with the lines under it: ``row_units``) holds every value of its row in column order (other words may come
    between: an outline puts a cell's link or code on lines of its own) and is no longer than a row's outline
    can be (four times the row's words plus sixteen a column: not a paragraph that happens to hold them), and
    another such unit holds every header in column order: the row reads as one and its column is found by
    position under the header row. A snapshot that lists the cells as lines of their own with nothing marking
    where a row begins ties none."""
    units = row_units(snapshot)
    tied = total = 0
    for table in tables:
        headers = [_words(h) for h in table["headers"]]
        every_header = [w for h in headers for w in h]
        width = len(headers)
        header_at = next((i for i, (_, have) in enumerate(units) if every_header
                          and len(have) <= 4 * len(every_header) + 16 * width
                          and _subsequence(have, every_header) >= 0), None)
        for row in table["rows"]:
            values = [_words(v) for v in row]
            whole = [w for v in values for w in v]
            as_row = header_at is not None and any(
                i != header_at and len(have) <= 4 * len(whole) + 16 * width and _subsequence(have, whole) >= 0
                for i, (_, have) in enumerate(units))
            for column, value in enumerate(values):
                if not value or column >= len(headers) or not headers[column]:
                    continue
                total += 1
                if as_row or any(one and _labelled(have, headers[column], value) for one, have in units):
                    tied += 1
    return {"tied": tied, "cells": total}


def words_kept(page_text: str, snapshot: str) -> float:
    """The share of the page's distinct visible words (case ignored) that the snapshot holds."""
    distinct = set(_words(page_text))
    if not distinct:
        return 1.0
    return round(len(distinct & set(_words(snapshot))) / len(distinct), 4)
