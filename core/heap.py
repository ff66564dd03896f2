"""The heap of a pod's process: how CPython's cyclic garbage collector treats it once the pod is built.

On CPython's defaults, a pod under load spent 9-12 % of its CPU in the collector and paused for a full pass of
43-58 ms every few seconds (``bench/bench_throughput.py`` at 64 sessions on a quiet machine, its GC passes timed in
the pod's process; docs/benchmarks.md). The cause is the shape of a proxied call: its objects live while the
browser answers, across several young passes of 700 allocations each, so they are promoted, die in the oldest
generation, and soon owe a full pass over the whole heap, start-up included. Two settings change that:

- what the process holds once it is built (modules, classes, the pod's own settings and routes) is frozen, so a
  full pass no longer walks it (``gc.freeze``; the CPython docs give it for a forking server's parent heap);
- the young generation holds :data:`YOUNG_GENERATION` allocations before a pass instead of 700, so a call's
  objects are mostly freed by reference counting before any pass sees them and few reach the older generations.
  A young pass over that many plain containers took 0.4 ms alone (up to 10 ms on the bench's shared, busy cores,
  some forty times less often); the cycles it frees wait a little longer.

Objects that only a cycle keeps are still collected; nothing but the frozen start-up heap is exempt, and what is
frozen lives as long as the process anyway.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_GENERATION", "prepare_heap"]

YOUNG_GENERATION = 10_000


def prepare_heap() -> int:
    """Once the pod is built, before it serves: collect what start-up left, freeze the rest, widen the young
    generation; returns how many objects are frozen. For a process that runs one pod, never for one that runs
    tests or other work beside it."""
    gc.collect()  # start-up's garbage goes now; frozen, it would stay for good
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION, middle, oldest)
    return gc.get_freeze_count()
