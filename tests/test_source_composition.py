"""The `yt` source composes with the rest of Structured Streaming as the seeds show (listing 1's watermark
and windows, joins with static data, deduplication), with exact expected results."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest
from pyspark.sql import functions as F

from tests.support.cluster import make_queue
from tests.support.source import checkpoint_of, read_queue, run_to_end

pytestmark = pytest.mark.spark

EVENT_SCHEMA = [{"name": "ts", "type": "timestamp"}, {"name": "num", "type": "int64"},
                {"name": "n", "type": "int64"}]
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def events(yt, yt_root):
    """A queue of events one second apart, `num = n % 3`: (queue, consumer, the rows)."""
    q, c = f"{yt_root}/events", f"{yt_root}/consumer"
    make_queue(yt, q, schema=EVENT_SCHEMA, consumer=c)
    rows = [{"ts": T0 + dt.timedelta(seconds=n), "num": n % 3, "n": n} for n in range(20)]
    yt.insert_rows(q, rows)
    return q, c, rows


def window_counts(rows, size: int, slide: int) -> Counter:
    """Expected (window start second, num) -> count, computed from the rows."""
    counts: Counter = Counter()
    for r in rows:
        second = int((r["ts"] - T0).total_seconds())
        for start in range(second - second % slide, second - size, -slide):
            counts[(start, r["num"])] += 1
    return counts


def seconds(value: dt.datetime) -> int:
    """Seconds after T0 of a window bound as PySpark collects it (naive local time)."""
    return int((value.astimezone(dt.UTC) - T0).total_seconds())


@pytest.mark.parametrize(("size", "slide"), [(5, 5), (5, 3)], ids=["tumbling", "sliding"])
def test_watermarked_window_counts_match_the_rows(spark, yt_root, events, size, slide):
    q, c, rows = events
    counted = (read_queue(spark, q, c, max_rows_per_partition=5).withWatermark("ts", "5 seconds")
               .groupBy(F.window("ts", f"{size} seconds", f"{slide} seconds"), "num").count())
    # Complete mode emits every window the stream has seen; append mode would hold the last ones back
    # until the watermark passes them.
    run = run_to_end(counted, checkpoint_of(yt_root), output_mode="complete")
    final = {}
    for r in run.rows:  # each batch re-emits all windows; the last emission wins
        final[(seconds(r["window"]["start"]), r["num"])] = r["count"]
    assert final == dict(window_counts(rows, size, slide))


def test_stream_static_join_enriches_every_row(spark, yt_root, events):
    q, c, rows = events
    names = spark.createDataFrame([(0, "zero"), (1, "one")], "num long, name string")
    joined = read_queue(spark, q, c).join(names, "num")
    run = run_to_end(joined, checkpoint_of(yt_root))
    expected = sorted((r["n"], ["zero", "one"][r["num"]]) for r in rows if r["num"] < 2)
    assert sorted((r["n"], r["name"]) for r in run.rows) == expected


def test_drop_duplicates_keeps_one_row_per_key_across_batches(spark, yt, yt_root, events):
    q, c, rows = events
    yt.insert_rows(q, rows)  # every event twice, the copies in later batches than the originals
    deduplicated = read_queue(spark, q, c, max_rows_per_partition=7).dropDuplicates(["n"])
    run = run_to_end(deduplicated, checkpoint_of(yt_root))
    assert sorted(r["n"] for r in run.rows) == [r["n"] for r in rows]
