"""Byte admission on real local Spark: `max_bytes_per_partition` with the row cap, whichever binds first, on the
embedded cluster and through the YTsaurus stand-in; by `$cumulative_data_weight` where the queue has it, else by
sampled row sizes; live from the tuning document."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streaming_core.cluster import Cluster
from streaming_core.tuning import write_tuning
from tests.support.cluster import make_queue
from tests.support.source import batches, checkpoint_of, read_queue, rows_read, run_to_end, run_until
from tests.support.standin import spark_backend

pytestmark = pytest.mark.spark

CDW_SCHEMA = [{"name": "data", "type": "string"}, {"name": "n", "type": "int64"},
              {"name": "$cumulative_data_weight", "type": "int64"}]
PLAIN_SCHEMA = CDW_SCHEMA[:2]
NARROW, WIDE = 10, 1000


def width_step(narrow: int, wide: int, start: int = 0) -> list[dict]:
    """`narrow` rows of a 10-byte payload, then `wide` rows of a 1000-byte one: rows grow 100x mid-stream."""
    return [{"data": ("x" * NARROW if n < start + narrow else "y" * WIDE), "n": n}
            for n in range(start, start + narrow + wide)]


def weight(row, cdw: bool) -> int:
    """YTsaurus' data weight of a row of these schemas: 1 + the payload + 8 for `n` (+ 8 for the cdw column)."""
    return 1 + len(row["data"]) + 8 + (8 if cdw else 0)


@pytest.fixture(params=["embedded", "ytsaurus"])
def yt(request, spark, cluster_uri) -> Iterator[Cluster]:
    """The cluster the query reads: the embedded one, or the stand-in through `ytsaurus-client` (the source's probes
    are `select_rows` calls to it, its reads `pull_consumer` calls)."""
    yield from spark_backend(request, spark, cluster_uri)


def test_the_byte_cap_binds_before_the_row_cap_once_rows_grow_wide(spark, yt, yt_root):
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, partitions=1, schema=CDW_SCHEMA, consumer=c)
    rows = width_step(20, 8)
    yt.insert_rows(q, rows)
    run = run_to_end(read_queue(spark, q, c, max_rows_per_partition=15, max_bytes_per_partition=3000),
                     checkpoint_of(yt_root))
    assert sorted(r["n"] for r in run.rows) == list(range(28))
    # 15 narrow rows (27 bytes each: the row cap binds), the other 5 and two wide ones (135 + 2 x 1017 bytes), then
    # two wide rows a batch (a third would reach 3051 bytes)
    assert [b.sizes()[0] for b in run.batches] == [15, 7, 2, 2, 2]
    for batch in run.batches:
        first = (batch.start or {0: -1})[0] + 1
        assert sum(weight(r, cdw=True) for r in rows[first:batch.end[0] + 1]) <= 3000


def test_without_cumulative_data_weight_sampled_row_sizes_bound_each_batch(spark, yt, yt_root):
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, partitions=2, schema=PLAIN_SCHEMA, consumer=c)
    rows = width_step(40, 20)
    for tablet in (0, 1):
        yt.insert_rows(q, rows, tablet_index=tablet)
    # only a byte cap: the source's default read limit is Spark's ReadMaxBytes
    run = run_to_end(read_queue(spark, q, c, max_bytes_per_partition="4k"), checkpoint_of(yt_root))
    assert len(run.rows) == 2 * len(rows)
    sizes = [b.sizes() for b in run.batches]
    for batch in run.batches:
        for p in (0, 1):
            first = (batch.start or {p: -1})[p] + 1
            read = rows[first:batch.end[p] + 1]
            assert len(read) <= 1 or sum(weight(r, cdw=False) for r in read) <= 4096
    assert max(max(s.values()) for s in sizes[1:]) <= 4  # wide rows: at most 4096 // 1009 a batch


def test_a_byte_cap_set_in_the_tuning_document_applies_from_a_later_batch_without_restart(spark, yt, yt_root):
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, partitions=1, schema=CDW_SCHEMA, consumer=c)
    yt.insert_rows(q, width_step(0, 60))
    tuned = []

    def cap_bytes_after_the_first_batch(query) -> None:
        if not tuned and batches(query):
            write_tuning(yt, f"{c}_tuning", max_bytes_per_partition=5 * 1017, reason="test")
            tuned.append(len(batches(query)))

    run = run_until(read_queue(spark, q, c, max_rows_per_partition=20), checkpoint_of(yt_root),
                    lambda query: rows_read(query) >= 60, on_progress=cap_bytes_after_the_first_batch)
    sizes = [b.sizes()[0] for b in run.batches]
    assert sorted(r["n"] for r in run.rows) == list(range(60))
    switch = sizes.index(5)
    assert switch >= tuned[0] and set(sizes[:switch]) == {20}
    assert all(s == 5 for s in sizes[switch:])
