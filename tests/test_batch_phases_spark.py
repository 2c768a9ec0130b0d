"""Each micro-batch's parts are measured where they happen and reach the query's phases document: every read task's
waits for the cluster and decoding (with the runner's acknowledging on the batch's first task), every sink task's
waits and inserts, and the sink's commit; with Spark's progress they make each batch's phases (`opsd.observe.phases`).
A batch query records nothing."""

from __future__ import annotations

import pytest

from opsd.observe.phases import batch_phases, shares_of
from opsd.observe.progress import parse_progress
from streaming_core.phase_timing import read_batch_records
from streaming_core.phases import phases_path
from tests.support.cluster import make_queue
from tests.support.sink import COPY_SCHEMA, fill_queue, make_table
from tests.support.source import read_queue

pytestmark = pytest.mark.spark


def test_every_task_and_the_commit_of_each_batch_record_their_parts(spark, yt, yt_root):
    make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
    fill_queue(yt, f"{yt_root}/q", 50)
    make_table(yt, f"{yt_root}/out", COPY_SCHEMA)
    tuning = f"{yt_root}/tuning"
    query = (read_queue(spark, f"{yt_root}/q", f"{yt_root}/c", max_rows_per_partition=20, tuning_path=tuning)
             .writeStream.format("yt").option("path", f"{yt_root}/out").option("tuning_path", tuning)
             .option("checkpointLocation", f"yt:/{yt_root}/cp").trigger(availableNow=True).start())
    query.awaitTermination(300)
    batch_ids = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]

    records = read_batch_records(yt, tuning)

    assert sorted(records) == batch_ids == [0, 1, 2]
    for batch_id, batch in records.items():
        assert len(batch.reads) == 2, "one record per tablet read"
        assert len(batch.sinks) == 2 and batch.commit is not None and batch.commit > 0
        assert all(t.read_wait > 0 and t.decode > 0 and t.batch_id == batch_id for t in batch.reads)
        assert all(t.upstream_wait > 0 and t.sink_insert > 0 for t in batch.sinks)
        assert all(t.ended >= t.started for t in (*batch.reads, *batch.sinks))
    assert sum(t.acknowledge for t in records[1].reads) > 0, "batch 0 was acknowledged while batch 1 was planned"
    assert sum(t.acknowledge for t in records[0].reads) == 0

    measured = [batch_phases(parse_progress(p).summary(), records.get(p["batchId"])) for p in query.recentProgress
                if p["numInputRows"]]
    for phases in measured:
        assert sum(phases.seconds.values()) == pytest.approx(phases.duration_seconds)
        assert all(phases.seconds[p] > 0 for p in ("planning", "read_wait", "decode", "sink_insert", "commit"))
    assert shares_of(measured).batches == 3


def test_a_batch_read_records_no_phases(spark, yt, yt_root):
    make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
    fill_queue(yt, f"{yt_root}/q", 5)
    assert spark.read.format("yt").option("tuning_path", f"{yt_root}/tuning").load(f"{yt_root}/q").count() == 10
    assert not yt.exists(phases_path(f"{yt_root}/tuning"))
