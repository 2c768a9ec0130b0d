"""The sink records each batch's insert statistics where opsd reads them: every task counts its calls, the batch's
commit (or abort, which counts a failed task as an error) stores their sum next to the sink's tuning document."""

from __future__ import annotations

import traceback
from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from opsd.observe.failures import insert_call_failed
from streaming_core.cluster import ClusterError
from streaming_core.options import SinkOptions
from streaming_core.sink import YtStreamWriter, plan_sink, write_rows
from streaming_core.write_stats import read_write_stats
from tests.support.sink import COPY_SCHEMA, make_table


def _plan(yt, yt_root):
    make_table(yt, f"{yt_root}/out", COPY_SCHEMA)
    options = SinkOptions.parse({"path": f"{yt_root}/out", "cluster": yt.uri, "dyn_batch_size": "40",
                                 "tuning_path": f"{yt_root}/tuning"}, {})
    return plan_sink(options, T.StructType().add("data", "string").add("n", "long"), overwrite=False)


def _rows(start: int, count: int) -> list[pa.RecordBatch]:
    return [pa.record_batch({"data": [f"r{i}" for i in range(start, start + count)],
                             "n": list(range(start, start + count))})]


def test_a_committed_batch_stores_the_calls_rows_and_seconds_of_all_its_tasks(yt, yt_root):
    plan = _plan(yt, yt_root)
    parts = [write_rows(plan, iter(_rows(0, 100))), write_rows(plan, iter(_rows(100, 30)))]
    assert (parts[0].stats.calls, parts[0].stats.rows, parts[0].stats.dyn_batch_size) == (3, 100, 40)

    YtStreamWriter(plan).commit(parts, 7)

    stats = read_write_stats(yt, f"{yt_root}/tuning")
    assert (stats.batch_id, stats.calls, stats.rows, stats.errors, stats.dyn_batch_size) == (7, 4, 130, 0, 40)
    assert 0 < stats.max_call_seconds <= stats.seconds


def test_an_aborted_batch_counts_its_failed_tasks_as_errors(yt, yt_root):
    plan = _plan(yt, yt_root)
    YtStreamWriter(plan).abort([write_rows(plan, iter(_rows(0, 10))), None], 8)
    stats = read_write_stats(yt, f"{yt_root}/tuning")
    assert (stats.batch_id, stats.calls, stats.errors) == (8, 1, 1)


def test_a_failed_insert_call_is_noted_in_the_failure_text_and_a_failed_source_is_not(yt, yt_root):
    """The tuner's only evidence of a failed insert call is Spark's failure text: the task's statistics die with it."""
    plan = _plan(yt, yt_root)
    yt.remove(f"{yt_root}/out")
    with pytest.raises(ClusterError) as insert:
        write_rows(plan, iter(_rows(0, 100)))

    def failing_source() -> Iterator[pa.RecordBatch]:
        yield from _rows(0, 10)
        raise OSError("the source's proxy went away")

    make_table(yt, f"{yt_root}/out", COPY_SCHEMA)
    with pytest.raises(OSError) as source:
        write_rows(plan, failing_source())

    assert insert_call_failed("".join(traceback.format_exception(insert.value)))
    assert f"40 rows into {yt_root}/out (dynBatchSize 40)" in "".join(traceback.format_exception(insert.value))
    assert not insert_call_failed("".join(traceback.format_exception(source.value)))
