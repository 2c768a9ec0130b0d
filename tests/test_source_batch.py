"""`spark.read.format("yt").load(path)`: batch reads of queues, sorted dynamic tables and static tables."""

from __future__ import annotations

import pytest

from tests.support.cluster import make_queue
from tests.support.source import numbered

pytestmark = pytest.mark.spark


def test_queue_read_returns_the_untrimmed_rows_of_every_tablet(spark, yt, yt_root):
    q = f"{yt_root}/queue"
    make_queue(yt, q, partitions=3)
    yt.insert_rows(q, numbered(30))
    trimmed = {n for batch in yt.read_tablet(q, 1, 0, 4) for n in batch.column("n").to_pylist()}
    yt.trim_rows(q, 1, 4)
    df = spark.read.format("yt").load(q)
    assert df.columns == ["data", "n"]
    assert sorted(r["n"] for r in df.collect()) == sorted(set(range(30)) - trimmed)


def test_sorted_table_read_returns_its_rows(spark, yt, yt_root):
    path = f"{yt_root}/sorted"
    yt.create("table", path, attributes={"dynamic": True, "schema": [
        {"name": "k", "type": "int64", "sort_order": "ascending"}, {"name": "v", "type": "string"}]})
    yt.insert_rows(path, [{"k": k, "v": f"v{k}"} for k in (3, 1, 2)])
    yt.insert_rows(path, [{"k": 2, "v": "updated"}])
    rows = spark.read.format("yt").load(path).collect()
    assert sorted((r["k"], r["v"]) for r in rows) == [(1, "v1"), (2, "updated"), (3, "v3")]


def test_static_table_read_returns_its_rows_across_chunks(spark, yt, yt_root):
    path = f"{yt_root}/static"
    yt.create("table", path, attributes={"schema": [{"name": "n", "type": "int64"}, {"name": "s", "type": "string"}]})
    yt.write_table(path, [{"n": n, "s": str(n)} for n in range(50_000)])
    yt.write_table(path, [{"n": n, "s": str(n)} for n in range(50_000, 70_000)], append=True)
    df = spark.read.format("yt").load(path)
    assert df.agg({"n": "sum"}).first()[0] == sum(range(70_000))
    assert df.count() == 70_000


def test_include_service_columns_in_a_batch_read_of_a_queue(spark, yt, yt_root):
    q = f"{yt_root}/queue"
    make_queue(yt, q, partitions=2)
    yt.insert_rows(q, numbered(3), tablet_index=1)
    rows = spark.read.format("yt").option("include_service_columns", "true").load(q).collect()
    assert [tuple(r) for r in rows] == [(1, i, f"row{i}", i) for i in range(3)]


def test_service_columns_of_a_table_that_is_not_a_queue_fail_at_load_naming_the_option(spark, yt, yt_root):
    path = f"{yt_root}/static"
    yt.create("table", path, attributes={"schema": [{"name": "n", "type": "int64"}]})
    with pytest.raises(Exception, match="'include_service_columns' applies to queues"):
        spark.read.format("yt").option("include_service_columns", "true").load(path)
