"""A pod's heap as `openab run` prepares it (core/heap.py): start-up's garbage collected, not frozen; what is
built frozen; the young generation widened; and a cycle made while serving still freed by the collector on its
own. Each check in a fresh interpreter: freezing this test process's heap would hold the rest of the suite's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from openab_browser.core.heap import YOUNG_GENERATION

CHILD = textwrap.dedent("""
    import gc, json, weakref

    class Node:
        pass

    def cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    from openab_browser.core.heap import prepare_heap

    kept = Node()  # built before the pod serves, and held
    left = cycle()  # start-up's garbage: only a cycle keeps it, and no young pass has come since
    frozen = prepare_heap()
    left_after = left() is not None
    kept_is_frozen = not any(o is kept for o in gc.get_objects())  # frozen objects are not the collector's
    while_serving = cycle()
    # More live containers than a young pass waits for (a pass counts allocations less frees); no explicit collect.
    held = [[] for _ in range(2 * gc.get_threshold()[0])]
    print(json.dumps({"frozen": frozen, "garbage_frozen": left_after, "kept_frozen": kept_is_frozen,
                      "threshold": gc.get_threshold(), "cycle_freed": while_serving() is None}))
""")


def test_start_up_garbage_is_collected_the_built_heap_frozen_and_later_cycles_still_freed() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(done.stdout)
    assert seen["frozen"] > 1000, seen  # the interpreter's and our modules' objects, at the least
    assert not seen["garbage_frozen"], "a cycle left by start-up was frozen for good instead of collected"
    assert seen["kept_frozen"], "what the pod holds once built still costs every full pass"
    assert seen["threshold"][0] == YOUNG_GENERATION > 700, seen
    assert seen["cycle_freed"], "a cycle made while serving was never collected"
