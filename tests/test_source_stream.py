"""`spark.readStream.format("yt")` on real local Spark: offsets, admission control, consumers, errors."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from pyspark.errors import StreamingQueryException
from yt import yson

from opsd.cli.main import main
from streaming_core.options import SRC_ROW_INDEX, SRC_TABLET_INDEX
from streaming_core.tuning import write_tuning
from tests.support.cluster import make_queue
from tests.support.source import (
    COMPOSITE_COLUMNS,
    batches,
    checkpoint_of,
    numbered,
    read_queue,
    rows_read,
    run_to_end,
    run_until,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def queue(yt, yt_root):
    """A 2-partition queue with a registered consumer: (queue path, consumer path)."""
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, consumer=c)
    return q, c


def ns(rows) -> list[int]:
    return sorted(r["n"] for r in rows)


class TestRestart:
    def test_restart_from_checkpoint_continues_without_loss_or_duplicates(self, spark, yt, yt_root, queue):
        q, c = queue
        cp = checkpoint_of(yt_root)
        yt.insert_rows(q, numbered(300))
        first = run_to_end(read_queue(spark, q, c, max_rows_per_partition=60), cp)
        yt.insert_rows(q, numbered(140, start=300))
        second = run_to_end(read_queue(spark, q, c, max_rows_per_partition=60), cp)
        assert ns(first.rows) == list(range(300))
        assert ns(second.rows) == list(range(300, 440))
        assert second.batches[0].start == first.batches[-1].end


class TestAdmissionControl:
    def test_cap_holds_per_partition_under_available_now(self, spark, yt, yt_root, queue):
        q, c = queue
        yt.insert_rows(q, numbered(170), tablet_index=0)
        yt.insert_rows(q, numbered(40, start=170), tablet_index=1)
        run = run_to_end(read_queue(spark, q, c, max_rows_per_partition=50), checkpoint_of(yt_root))
        assert ns(run.rows) == list(range(210))
        assert [b.sizes() for b in run.batches] == [{0: 50, 1: 40}, {0: 50, 1: 0}, {0: 50, 1: 0}, {0: 20, 1: 0}]
        assert all(b.rows == sum(b.sizes().values()) for b in run.batches)

    def test_cap_holds_per_partition_under_processing_time(self, spark, yt, yt_root, queue):
        q, c = queue
        yt.insert_rows(q, numbered(240))
        run = run_until(read_queue(spark, q, c, max_rows_per_partition=40), checkpoint_of(yt_root),
                        lambda query: rows_read(query) >= 240)
        assert ns(run.rows) == list(range(240))
        assert len(run.batches) == 3
        assert all(max(b.sizes().values()) <= 40 and b.rows == sum(b.sizes().values()) for b in run.batches)

    def test_trigger_once_reads_everything_in_one_batch_despite_the_cap(self, spark, yt, yt_root, queue):
        q, c = queue
        yt.insert_rows(q, numbered(200))
        run = run_to_end(read_queue(spark, q, c, max_rows_per_partition=10), checkpoint_of(yt_root),
                            trigger={"once": True})
        assert ns(run.rows) == list(range(200))
        assert [b.rows for b in run.batches] == [200]

    def test_available_now_leaves_rows_written_after_its_start_for_the_next_run(self, spark, yt, yt_root, queue):
        q, c = queue
        yt.insert_rows(q, numbered(100))
        df = read_queue(spark, q, c, max_rows_per_partition=10)
        added = []

        def add_rows_once(batch_df, batch_id):
            if batch_id == 0:
                yt.insert_rows(q, numbered(20, start=100))
                added.append(batch_id)

        query = (df.writeStream.foreachBatch(add_rows_once).option("checkpointLocation", checkpoint_of(yt_root))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert added == [0]
        assert batches(query)[-1].end == {0: 49, 1: 49}  # the 100 rows there at the start, no more

    def test_live_tuning_changes_the_cap_without_restart(self, spark, yt, yt_root, queue):
        q, c = queue
        yt.insert_rows(q, numbered(2000))
        tuned = []

        def tune_after_first_batch(query):
            if not tuned and batches(query):
                write_tuning(yt, f"{c}_tuning", max_rows_per_partition=400, reason="test")
                tuned.append(len(batches(query)))

        run = run_until(read_queue(spark, q, c, max_rows_per_partition=20), checkpoint_of(yt_root),
                        lambda query: rows_read(query) >= 2000, on_progress=tune_after_first_batch)
        sizes = [max(b.sizes().values()) for b in run.batches]
        assert ns(run.rows) == list(range(2000))
        switch = sizes.index(400)
        assert switch >= tuned[0]
        assert set(sizes[:switch]) == {20}
        assert all(s == 400 for s in sizes[switch:-1]) and sizes[-1] <= 400


class TestConsumer:
    def test_commit_advances_the_consumer_and_available_now_leaves_its_last_batch_unacknowledged(
            self, spark, yt, yt_root, queue):
        q, c = queue
        cp = checkpoint_of(yt_root)
        yt.insert_rows(q, numbered(90))
        run = run_to_end(read_queue(spark, q, c, max_rows_per_partition=20), cp)
        assert [b.end for b in run.batches] == [{0: 19, 1: 19}, {0: 39, 1: 39}, {0: 44, 1: 44}]
        # The desync of the seeds: only the batches before the last are acknowledged.
        assert yt.get_consumer_offsets(c, q) == {0: 40, 1: 40}
        yt.insert_rows(q, numbered(2, start=90))
        rerun = run_to_end(read_queue(spark, q, c, max_rows_per_partition=20), cp)
        assert ns(rerun.rows) == [90, 91]
        assert yt.get_consumer_offsets(c, q) == {0: 45, 1: 45}

    def test_consumer_ahead_of_the_checkpoint_moves_the_next_batch_start(self, spark, yt, yt_root, queue):
        q, c = queue
        cp = checkpoint_of(yt_root)
        yt.insert_rows(q, numbered(10), tablet_index=0)
        yt.insert_rows(q, numbered(10, start=10), tablet_index=1)
        first = run_to_end(read_queue(spark, q, c), cp)
        yt.insert_rows(q, numbered(10, start=20), tablet_index=0)
        yt.insert_rows(q, numbered(10, start=30), tablet_index=1)
        yt.advance_consumer(c, q, 0, None, 15)  # another reader acknowledged rows 10..14 of partition 0
        second = run_to_end(read_queue(spark, q, c), cp)
        assert ns(first.rows) == list(range(20))
        assert ns(second.rows) == list(range(25, 40))
        # The second run acknowledged the first run's batch (end 9, 9) without moving partition 0 backwards.
        assert yt.get_consumer_offsets(c, q) == {0: 15, 1: 10}

    def test_unregistered_consumer_is_an_error_at_load(self, spark, yt, yt_root, queue):
        q, _ = queue
        other = f"{yt_root}/other_consumer"
        yt.create_consumer(other)
        with pytest.raises(Exception, match=f"consumer {other} is not registered for queue {q}"):
            read_queue(spark, q, other)


class TestErrors:
    @pytest.mark.parametrize(("option", "value"), [
        ("max_rows_per_partiton", "10"), ("max_rows_per_partition", "many"), ("max_bytes_per_partition", "lots"),
        ("include_service_columns", "sure"), ("parsing_type_v3", "yes please"), ("cluster", "ftp://x"),
    ])
    def test_bad_option_fails_at_load_naming_it(self, spark, queue, option, value):
        q, c = queue
        with pytest.raises(Exception, match=f"'{option}'"):
            read_queue(spark, q, c, **{option: value})

    def test_consumer_path_that_is_not_a_yt_path_fails_at_load(self, spark, queue):
        q, _ = queue
        with pytest.raises(Exception, match="'consumer_path'"):
            read_queue(spark, q, "consumer")

    def test_stream_without_consumer_path_fails_at_start_naming_it(self, spark, yt_root, queue):
        q, _ = queue
        df = spark.readStream.format("yt").load(q)  # load cannot tell a stream from a batch read
        with pytest.raises(Exception, match="'consumer_path' is required"):
            run_to_end(df, checkpoint_of(yt_root))

    def test_trimmed_range_fails_the_batch_naming_queue_partition_and_range(self, spark, yt, yt_root, queue):
        q, c = queue
        yt.insert_rows(q, numbered(20), tablet_index=0)
        yt.insert_rows(q, numbered(20, start=20), tablet_index=1)
        yt.trim_rows(q, 1, 5)
        with pytest.raises(StreamingQueryException) as failure:
            run_to_end(read_queue(spark, q, c), checkpoint_of(yt_root))
        message = str(failure.value)
        assert f"{q}: partition 1, rows [0, 5) of the requested range [0, 20) were trimmed" in message
        assert "5 rows lost. To go on without them" in message
        assert f"(opsd consumer seek {q} {c} --partition 1 --to trim)" in message
        assert yt.get_consumer_offsets(c, q) == {}

    @pytest.mark.hostile
    def test_a_checkpoint_past_a_recreated_queues_end_fails_naming_it_and_the_advised_fix_reads_every_row(
            self, spark, yt, yt_root, queue, cluster_uri):
        q, c = queue
        cp = checkpoint_of(yt_root)
        yt.insert_rows(q, numbered(100))
        run_to_end(read_queue(spark, q, c), cp)  # the checkpoint has read rows 0..49 of each partition
        yt.remove(q)
        make_queue(yt, q)
        yt.register_queue_consumer(q, c)
        yt.insert_rows(q, numbered(6, start=1000))  # the queue recreated under its path: 3 rows per partition

        with pytest.raises(StreamingQueryException) as failure:
            run_to_end(read_queue(spark, q, c), cp)
        assert main(["consumer", "seek", q, c, "--to", "trim", "--past-checkpoint", "--cluster", cluster_uri]) == 0
        fixed = run_to_end(read_queue(spark, q, c), checkpoint_of(yt_root, "new-checkpoint"))

        message = str(failure.value)
        assert "BeyondQueueEndError" in message
        assert f"{q}: partition 0: the checkpoint is at row 50 (last read 49), but the queue ends at 3 rows" in message
        assert "Reading on would skip rows [3, 50) once they are written" in message
        assert f"(opsd consumer seek {q} {c} --to trim --past-checkpoint)" in message
        assert "new checkpointLocation" in message
        assert ns(fixed.rows) == list(range(1000, 1006))

    @pytest.mark.hostile
    def test_a_consumer_moved_past_the_queues_end_fails_the_next_batch_naming_it_and_the_seek_back(
            self, spark, yt, yt_root, queue):
        q, c = queue
        cp = checkpoint_of(yt_root)
        yt.insert_rows(q, numbered(10))
        run_to_end(read_queue(spark, q, c), cp)  # the checkpoint has read rows 0..4 of each partition
        yt.advance_consumer(c, q, 1, None, 500)

        with pytest.raises(StreamingQueryException) as failure:
            run_to_end(read_queue(spark, q, c), cp)

        message = str(failure.value)
        assert (f"{q}: partition 1: the consumer {c} is at row 500 (last read 499), but the queue ends at 5 rows"
                in message)
        assert f"(opsd consumer seek {q} {c} --partition 1 --offset 5)" in message
        assert yt.get_consumer_offsets(c, q)[1] == 500

    def test_tablets_removed_under_a_checkpoint_stop_the_query_with_the_named_error(self, spark, yt, yt_root):
        q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
        make_queue(yt, q, partitions=3, consumer=c)
        cp = checkpoint_of(yt_root)
        yt.insert_rows(q, numbered(30))
        run_to_end(read_queue(spark, q, c), cp)
        yt.trim_rows(q, 2, 10)
        yt.reshard(q, 2)
        with pytest.raises(StreamingQueryException) as failure:
            run_to_end(read_queue(spark, q, c), cp)
        message = str(failure.value)
        assert "QueueReshardedError" in message
        assert f"{q}: the checkpoint has read partition 2, but the queue now has 2 tablet(s)" in message


class TestColumns:
    def test_service_columns_come_first_with_tablet_and_row_indices(self, spark, yt, yt_root, queue):
        q, c = queue
        yt.insert_rows(q, numbered(5), tablet_index=0)
        yt.insert_rows(q, numbered(3, start=5), tablet_index=1)
        df = read_queue(spark, q, c, include_service_columns="true")
        assert df.columns == [SRC_TABLET_INDEX, SRC_ROW_INDEX, "data", "n"]
        run = run_to_end(df, checkpoint_of(yt_root))
        got = sorted((r[SRC_TABLET_INDEX], r[SRC_ROW_INDEX], r["n"]) for r in run.rows)
        assert got == [(0, i, i) for i in range(5)] + [(1, i, 5 + i) for i in range(3)]


COMPOSITE_SCHEMA = [{"name": "n", "type": "int64", "required": True}, *COMPOSITE_COLUMNS]


def composite_row(n: int) -> dict:
    return {"n": n, "l": list(range(n)), "s": {"a": n, "b": None if n % 2 else f"b{n}"}, "d": {"k": n, "j": -n},
            "o": None if n % 2 else n, "t": {"_1": n, "_2": str(n)},
            "dec": decimal.Decimal(f"{n}.25"), "day": dt.date(2024, 1, 1 + n),
            "ts": dt.datetime(2024, 1, 1, 12, n, tzinfo=dt.UTC)}


class TestCompositeTypes:
    @pytest.fixture
    def composite_queue(self, yt, yt_root):
        q, c = f"{yt_root}/composite", f"{yt_root}/consumer"
        make_queue(yt, q, schema=COMPOSITE_SCHEMA, consumer=c)
        yt.insert_rows(q, [composite_row(n) for n in range(4)])
        return q, c

    def test_composite_types_arrive_as_spark_types_with_parsing_type_v3(self, spark, yt_root, composite_queue):
        q, c = composite_queue
        run = run_to_end(read_queue(spark, q, c, parsing_type_v3="true"), checkpoint_of(yt_root))
        got = sorted(run.rows, key=lambda r: r["n"])
        for row, n in zip(got, range(4), strict=True):
            want = composite_row(n)
            assert row["l"] == want["l"]
            assert row["s"].asDict() == want["s"]
            assert row["d"] == want["d"]
            assert row["o"] == want["o"]
            assert tuple(row["t"]) == (n, str(n))
            assert (row["dec"], row["day"]) == (want["dec"], want["day"])
            assert row["ts"].replace(tzinfo=None) == spark_local(want["ts"])

    def test_composite_types_arrive_as_yson_without_parsing_type_v3(self, spark, yt_root, composite_queue):
        q, c = composite_queue
        run = run_to_end(read_queue(spark, q, c), checkpoint_of(yt_root))
        got = sorted(run.rows, key=lambda r: r["n"])
        for row, n in zip(got, range(4), strict=True):
            want = composite_row(n)
            assert isinstance(row["l"], bytes)
            assert yson.loads(bytes(row["l"])) == want["l"]
            assert yson.loads(bytes(row["s"])) == want["s"]
            assert dict(yson.loads(bytes(row["d"]))) == want["d"]
            assert yson.loads(bytes(row["t"])) == want["t"]
            assert (row["o"], row["dec"], row["day"]) == (want["o"], want["dec"], want["day"])


def spark_local(ts: dt.datetime) -> dt.datetime:
    """A UTC timestamp as PySpark's `collect()` returns it: naive, in the local time zone."""
    return ts.astimezone().replace(tzinfo=None)


class TestThreads:
    def test_a_yt_sink_starts_from_another_thread_after_activate(self, spark, yt, yt_root, queue):
        import threading

        from streaming_core import activate

        q, c = queue
        out = f"{yt_root}/out"
        make_queue(yt, out, partitions=1)
        yt.insert_rows(q, numbered(50))
        jvm_sessions = spark._jvm.org.apache.spark.sql.SparkSession
        errors: list[Exception] = []

        def start_in_thread() -> None:
            # A JVM thread with neither an active nor a default session, as a Python thread may get.
            jvm_sessions.clearActiveSession()
            activate(spark)
            try:
                (read_queue(spark, q, c).writeStream.format("yt").option("path", out)
                 .option("checkpointLocation", checkpoint_of(yt_root)).trigger(availableNow=True)
                 .start().awaitTermination())
            except Exception as e:
                errors.append(e)

        jvm_sessions.clearDefaultSession()
        try:
            thread = threading.Thread(target=start_in_thread)
            thread.start()
            thread.join(300)
        finally:
            jvm_sessions.setDefaultSession(spark._jsparkSession)
        assert not errors
        written = [r for b in yt.read_tablet(out, 0, 0, yt.get_tablet_infos(out)[0].total_row_count)
                   for r in b.to_pylist()]
        assert ns(written) == list(range(50))
