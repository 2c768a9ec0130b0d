"""`writeStream.format("yt")` on real local Spark: ordered appends, sorted upserts, dynBatchSize, live tuning."""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.utils import StreamingQueryException

from streaming_core.tuning import write_tuning
from tests.support.cluster import make_queue
from tests.support.sink import COPY_SCHEMA, fill_queue, make_table, multiset, ordered_rows, session_conf, stored_chunks
from tests.support.source import read_queue

pytestmark = pytest.mark.spark


def to_yt(df: DataFrame, target: str, checkpoint: str, *, output_mode: str = "append", trigger: dict | None = None,
          **options) -> StreamingQuery:
    writer = (df.writeStream.format("yt").outputMode(output_mode).option("path", target)
              .option("checkpointLocation", checkpoint).trigger(**(trigger or {"availableNow": True})))
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.start()


def run_to_end(df: DataFrame, target: str, checkpoint: str, **kwargs) -> StreamingQuery:
    query = to_yt(df, target, checkpoint, **kwargs)
    query.awaitTermination(300)
    assert not query.isActive, "the availableNow query should have finished"
    return query


def batches_with_rows(query: StreamingQuery) -> int:
    return sum(1 for p in query.recentProgress if p["numInputRows"])


def test_each_micro_batch_is_appended_to_an_ordered_table(spark, yt, yt_root):
    make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
    rows = fill_queue(yt, f"{yt_root}/q", 50)
    make_table(yt, f"{yt_root}/out", COPY_SCHEMA, tablets=2)
    query = run_to_end(read_queue(spark, f"{yt_root}/q", f"{yt_root}/c", max_rows_per_partition=20),
                       f"{yt_root}/out", f"yt:/{yt_root}/cp")
    assert batches_with_rows(query) == 3
    assert multiset(ordered_rows(yt, f"{yt_root}/out"), "data", "n") == multiset(rows, "data", "n")


def test_append_upserts_into_a_sorted_table_by_its_key_the_last_row_winning(spark, yt, yt_root):
    make_queue(yt, f"{yt_root}/q", partitions=1, consumer=f"{yt_root}/c")
    yt.insert_rows(f"{yt_root}/q", [{"data": f"k{i % 4}", "n": i} for i in range(30)])
    make_table(yt, f"{yt_root}/out", [{"name": "data", "type": "string", "sort_order": "ascending"},
                                      {"name": "n", "type": "int64"}])
    query = run_to_end(read_queue(spark, f"{yt_root}/q", f"{yt_root}/c", max_rows_per_partition=10),
                       f"{yt_root}/out", f"yt:/{yt_root}/cp")
    assert batches_with_rows(query) == 3
    assert yt.select_rows(f"{yt_root}/out") == [{"data": "k0", "n": 28}, {"data": "k1", "n": 29},
                                                {"data": "k2", "n": 26}, {"data": "k3", "n": 27}]


def _counts_setup(yt, yt_root) -> list[str]:
    make_queue(yt, f"{yt_root}/q", partitions=1, consumer=f"{yt_root}/c")
    keys = [f"k{i % 3}" for i in range(20)] + ["late"] * 5  # counts grow in every batch; "late" comes last
    yt.insert_rows(f"{yt_root}/q", [{"data": k, "n": i} for i, k in enumerate(keys)])
    make_table(yt, f"{yt_root}/out", [{"name": "data", "type": "string", "sort_order": "ascending"},
                                      {"name": "count", "type": "int64"}])
    return keys


def test_complete_mode_rewrites_a_changing_grouped_count_into_a_sorted_table(spark, yt, yt_root):
    keys = _counts_setup(yt, yt_root)
    counts = read_queue(spark, f"{yt_root}/q", f"{yt_root}/c", max_rows_per_partition=10).groupBy("data").count()
    query = run_to_end(counts, f"{yt_root}/out", f"yt:/{yt_root}/cp", output_mode="complete")
    assert [p["sink"]["numOutputRows"] for p in query.recentProgress if p["numInputRows"]] == [3, 3, 4]
    assert {r["data"]: r["count"] for r in yt.select_rows(f"{yt_root}/out")} == Counter(keys)


def test_update_mode_is_refused_by_spark_for_python_sinks_and_foreach_batch_upserts_instead(spark, yt, yt_root):
    """PySpark 4.2 gives Python stream writers no way to accept output mode update (the JVM side would need
    `SupportsStreamingUpdateAsAppend`); `foreachBatch` + `df.write.format("yt")` upserts the updated rows."""
    keys = _counts_setup(yt, yt_root)
    counts = read_queue(spark, f"{yt_root}/q", f"{yt_root}/c", max_rows_per_partition=10).groupBy("data").count()
    with pytest.raises(StreamingQueryException, match="yt does not support Update mode"):
        to_yt(counts, f"{yt_root}/out", f"yt:/{yt_root}/cp-direct", output_mode="update").awaitTermination(300)

    updated = []

    def upsert(frame, _batch_id):
        updated.append(frame.count())
        frame.write.format("yt").mode("append").save(f"{yt_root}/out")

    query = (counts.writeStream.outputMode("update").foreachBatch(upsert).trigger(availableNow=True)
             .option("checkpointLocation", f"yt:/{yt_root}/cp").start())
    query.awaitTermination(300)
    assert updated == [3, 3, 1]  # only the keys whose count changed
    assert {r["data"]: r["count"] for r in yt.select_rows(f"{yt_root}/out")} == Counter(keys)


def test_complete_mode_into_an_ordered_table_is_a_clear_error(spark, yt, yt_root):
    make_queue(yt, f"{yt_root}/q", partitions=1, consumer=f"{yt_root}/c")
    fill_queue(yt, f"{yt_root}/q", 5, tablets=1)
    make_table(yt, f"{yt_root}/out", [{"name": "data", "type": "string"}, {"name": "count", "type": "int64"}])
    counts = read_queue(spark, f"{yt_root}/q", f"{yt_root}/c").groupBy("data").count()
    with pytest.raises(StreamingQueryException, match=r"output mode .complete. .* needs a sorted"):
        to_yt(counts, f"{yt_root}/out", f"yt:/{yt_root}/cp", output_mode="complete").awaitTermination(300)
    assert ordered_rows(yt, f"{yt_root}/out") == []


class TestDynBatchSize:
    """Insert calls carry at most dynBatchSize rows: seen as the chunks the embedded cluster stores per call."""

    def _copy(self, spark, yt, yt_root, rows_per_tablet: int, **options) -> list[int]:
        make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
        fill_queue(yt, f"{yt_root}/q", rows_per_tablet)
        make_table(yt, f"{yt_root}/out", COPY_SCHEMA)
        run_to_end(read_queue(spark, f"{yt_root}/q", f"{yt_root}/c"), f"{yt_root}/out", f"yt:/{yt_root}/cp",
                   **options)
        assert len(ordered_rows(yt, f"{yt_root}/out")) == 2 * rows_per_tablet
        return sorted(stored_chunks(yt.root, f"{yt_root}/out"))

    def test_the_session_conf_sets_the_rows_per_insert(self, spark, yt, yt_root):
        with session_conf(spark, spark__yt__write__dynBatchSize="7"):
            sizes = self._copy(spark, yt, yt_root, 30)
        assert sizes == sorted([7] * 8 + [2] * 2)  # two tasks of 30 rows each: 7+7+7+7+2

    def test_the_option_overrides_the_session_conf(self, spark, yt, yt_root):
        with session_conf(spark, spark__yt__write__dynBatchSize="7"):
            sizes = self._copy(spark, yt, yt_root, 30, dyn_batch_size=12)
        assert sizes == sorted([12] * 4 + [6] * 2)

    def test_a_new_value_in_the_tuning_document_applies_from_the_next_batch_without_a_restart(
            self, spark, yt, yt_root):
        make_queue(yt, f"{yt_root}/q", partitions=1, consumer=f"{yt_root}/c")
        make_table(yt, f"{yt_root}/out", COPY_SCHEMA)
        tuning = f"{yt_root}/tuning"
        write_tuning(yt, tuning, dyn_batch_size=4, reason="test")
        query = to_yt(read_queue(spark, f"{yt_root}/q", f"{yt_root}/c"), f"{yt_root}/out", f"yt:/{yt_root}/cp",
                      trigger={"processingTime": "200 milliseconds"}, dyn_batch_size=1000, tuning_path=tuning)
        try:
            fill_queue(yt, f"{yt_root}/q", 20, tablets=1)
            query.processAllAvailable()
            first = stored_chunks(yt.root, f"{yt_root}/out")
            write_tuning(yt, tuning, dyn_batch_size=9, reason="test")
            yt.insert_rows(f"{yt_root}/q", [{"data": "more", "n": i} for i in range(20)])
            query.processAllAvailable()
            assert query.isActive
        finally:
            query.stop()
        assert first == [4] * 5
        assert stored_chunks(yt.root, f"{yt_root}/out")[len(first):] == [9, 9, 2]


def test_an_at_least_once_batch_that_fails_on_its_data_leaves_nothing_and_names_the_row(spark, yt, yt_root):
    """One task's value does not fit an int32 column: the other task's rows must not stay in the table."""
    make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
    yt.insert_rows(f"{yt_root}/q", [{"data": f"r{i}", "n": i} for i in range(200)], tablet_index=0)
    yt.insert_rows(f"{yt_root}/q", [{"data": "r0", "n": 1}, {"data": "big", "n": 2**40}], tablet_index=1)
    make_table(yt, f"{yt_root}/out", [{"name": "data", "type": "string"}, {"name": "n", "type": "int32"}])

    query = to_yt(read_queue(spark, f"{yt_root}/q", f"{yt_root}/c"), f"{yt_root}/out", f"yt:/{yt_root}/cp")
    with pytest.raises(StreamingQueryException) as failure:
        query.awaitTermination(300)

    assert "column 'n'" in str(failure.value) and str(2**40) in str(failure.value)
    assert ordered_rows(yt, f"{yt_root}/out") == []
    assert yt.get_consumer_offsets(f"{yt_root}/c", f"{yt_root}/q") == {}
    assert not yt.exists(f"{yt_root}/out_staging") or not yt.list(f"{yt_root}/out_staging")
