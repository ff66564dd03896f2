"""The counting of bench/bench_snapshot_tokens.py's real-page corpus (issue 23), on snapshot texts shaped as the
three tools write them: what ties a table cell to its column header, what a paragraph that merely holds the same
words does not, and the share of visible words kept. The corpus itself (Debian docs, a Django admin, JupyterLab)
installs hundreds of megabytes and runs outside the suite: ``python bench/bench_snapshot_tokens.py --corpus``."""

from __future__ import annotations

from bench.counting import NEXT_OFFSET, tied_cells, words_kept

ORDERS = [{"headers": ["", "Number", "Customer", "Shipped at"],
           "rows": [["", "SO-1041", "Grace Dijkstra", "Jan. 9, 2026, 10:15 a.m."],
                    ["", "SO-1040", "Ada Lovelace", "-"]]}]
# Five cells have words: the checkbox column has no header word, and "-" no word.
CELLS = 5


def test_a_row_whose_cells_are_lines_under_it_is_tied_by_position_under_the_header_row() -> None:
    # @playwright/mcp's shape: a row line, its cells indented under it, a header row above.
    snapshot = """- table [ref=e83]:
  - rowgroup [ref=e84]:
    - row [ref=e85]:
      - columnheader [ref=e86]:
        - checkbox "Select all objects on this page for an action" [ref=e89]
      - columnheader [ref=e90]:
        - link "Number" [ref=e92] [cursor=pointer]:
          - /url: "?o=1"
      - columnheader "Customer" [ref=e93]
      - columnheader "Shipped at" [ref=e94]
  - row [ref=e840]:
    - cell [ref=e841]:
      - checkbox "Select this object for an action - SO-1041" [ref=e842]
    - rowheader [ref=e843]:
      - link "SO-1041" [ref=e844] [cursor=pointer]:
        - /url: /admin/shop/order/2/change/
    - cell "Grace Dijkstra" [ref=e845]
    - cell "Jan. 9, 2026, 10:15 a.m." [ref=e850]
  - row [ref=e853]:
    - rowheader "SO-1040" [ref=e856]
    - cell "Ada Lovelace" [ref=e858]
    - cell "-" [ref=e859]
"""
    assert tied_cells(ORDERS, snapshot) == {"tied": CELLS, "cells": CELLS}


def test_a_grid_of_one_line_a_row_and_labelled_values_are_tied() -> None:
    grid = """- table 2x4:
 | | Number | Customer | Shipped at |
 |-|-|-|-|
 | - checkbox [ref=e1] | [SO-1041](e2) | Grace Dijkstra | Jan. 9, 2026, 10:15 a.m. |
 | - checkbox [ref=e3] | [SO-1040](e4) | Ada Lovelace | - |
"""
    assert tied_cells(ORDERS, grid) == {"tied": CELLS, "cells": CELLS}
    labelled = ("Number: SO-1041; Customer: Grace Dijkstra; Shipped at: Jan. 9, 2026, 10:15 a.m.\n"
                "Number=SO-1040 Customer=Ada Lovelace")
    assert tied_cells(ORDERS, labelled) == {"tied": CELLS, "cells": CELLS}


def test_cells_as_lines_of_their_own_or_words_in_prose_are_not_tied() -> None:
    # openab's and chrome-devtools-mcp's shape before issue 23: nothing says where a row begins.
    flat = """Number
Customer
Shipped at
- link "SO-1041" [ref=e2]
Grace Dijkstra
Jan. 9, 2026, 10:15 a.m.
- link "SO-1040" [ref=e4]
Ada Lovelace
"""
    assert tied_cells(ORDERS, flat) == {"tied": 0, "cells": CELLS}
    # A long paragraph that holds a row's words in order under a line of the headers is not a row, and a header
    # word a few words before a value is no label.
    prose = ("Number, customer, shipped at\n"
             + "Each order is listed with the day it was placed and the day it left the dock. " * 6
             + "SO-1041 went to Grace Dijkstra on Jan. 9, 2026, 10:15 a.m. by the morning van. " * 3
             + "SO-1040 was put aside: the Customer who called was Ada Lovelace.")
    assert tied_cells(ORDERS, prose) == {"tied": 0, "cells": CELLS}


def test_words_kept_is_the_share_of_distinct_visible_words_and_the_paging_note_is_read() -> None:
    assert words_kept("Save the draft. Save it now", "- button \"Save\" [ref=e1]\nthe draft") == 0.6
    assert words_kept("", "anything") == 1.0
    note = "[characters 0-40000 of 86166. Call again with offset=40000 for more.]"
    found = NEXT_OFFSET.search(note)
    assert found is not None and found.group(1) == "40000"
    assert NEXT_OFFSET.search("[characters 80000-86166 of 86166. This is the end.]") is None
