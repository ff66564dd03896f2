"""The records' time (core/timestamps.py): the digits datetime gives, whatever the order the times come in."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from openab_browser.core.timestamps import iso_utc


def by_datetime(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_the_time_reads_as_datetime_writes_it_at_every_edge_of_a_second() -> None:
    edges = [0.0, 0.0005, 0.9994999, 0.9995, 0.9999994, 0.9999995, 0.9999996, 0.999999999, 1e-7, 0.5000005]
    seconds = [0, 59, 1_798_761_599, 1_798_761_600, 4_102_444_799, 951_782_400]  # 2026-12-31 23:59:59, 2100, a leap day
    times = [s + e for s in seconds for e in edges]
    times += [random.Random(7).uniform(0, 4_102_444_800) for _ in range(20_000)]
    # Shuffled: the text of the last second is kept, so a time of another second must never take it.
    random.Random(11).shuffle(times)
    assert [iso_utc(t) for t in times] == [by_datetime(t) for t in times]


def test_times_in_order_across_a_new_second_and_back() -> None:
    assert [iso_utc(t) for t in (1_798_761_599.9991, 1_798_761_600.0001, 1_798_761_599.5)] == [
        "2026-12-31T23:59:59.999Z", "2027-01-01T00:00:00.000Z", "2026-12-31T23:59:59.500Z"]
