"""Parsing StreamingQueryProgress JSON into BatchProgress: real Spark output and yt-shaped offsets."""

from __future__ import annotations

import json
import math

import pytest

from opsd.observe.progress import (
    PartitionOffsets,
    parse_progress,
    parse_timestamp,
)
from opsd.observe.status import jsonable
from streaming_core.offsets import QueueOffset
from tests.support.spark import windowed_rate_counts
from tests.support.wait import wait_until

# Captured from a real local run (PySpark 4.2.1): rate source -> 1 s window count with a 2 s
# watermark -> memory sink, batch 2.
REAL_RATE_WINDOW_PROGRESS = r"""
{
  "id": "a08bc8ac-4fec-4f54-b959-bce19e763fff",
  "runId": "f9f9aed6-31a7-46c2-bb26-296ba9b16a54",
  "name": "rate_window",
  "timestamp": "2026-11-22T02:23:16.875Z",
  "batchId": 2,
  "batchDuration": 1458,
  "numInputRows": 100,
  "inputRowsPerSecond": 52.6,
  "processedRowsPerSecond": 68.6,
  "durationMs": {
    "addBatch": 1141,
    "commitOffsets": 61,
    "getBatch": 0,
    "latestOffset": 0,
    "queryPlanning": 133,
    "triggerExecution": 1457,
    "walCommit": 113
  },
  "eventTime": {
    "avg": "2026-11-22T02:23:15.418Z",
    "max": "2026-11-22T02:23:16.408Z",
    "min": "2026-11-22T02:23:14.428Z",
    "watermark": "2026-11-22T02:23:12.408Z"
  },
  "stateOperators": [
    {
      "operatorName": "stateStoreSave",
      "numRowsTotal": 5,
      "numRowsUpdated": 3,
      "allUpdatesTimeMs": 51,
      "numRowsRemoved": 2,
      "allRemovalsTimeMs": 90,
      "commitTimeMs": 157,
      "memoryUsedBytes": 2736,
      "numRowsDroppedByWatermark": 0,
      "numShufflePartitions": 2,
      "numStateStoreInstances": 2,
      "customMetrics": {
        "SnapshotLastUploaded.partition_0_default": -1,
        "SnapshotLastUploaded.partition_1_default": -1,
        "forceSnapshotCount": 0,
        "loadedMapCacheHitCount": 8,
        "loadedMapCacheMissCount": 0,
        "numSnapshotsAutoRepaired": 0,
        "stateOnCurrentVersionSizeBytes": 1424
      }
    }
  ],
  "sources": [
    {
      "description": "RateStreamV2[rowsPerSecond=50, rampUpTimeSeconds=0, numPartitions=default",
      "startOffset": 4,
      "endOffset": 6,
      "latestOffset": 6,
      "numInputRows": 100,
      "inputRowsPerSecond": 52.6,
      "processedRowsPerSecond": 68.6
    }
  ],
  "sink": {
    "description": "MemorySink",
    "numOutputRows": 2
  }
}
"""


def yt_progress(**overrides: object) -> dict[str, object]:
    """A progress dict of a query reading one yt queue with two partitions."""
    offset = {"cluster": "local", "path": "//home/q", "consumer_path": "//home/c"}
    data: dict[str, object] = {
        "id": "11111111-1111-1111-1111-111111111111",
        "runId": "22222222-2222-2222-2222-222222222222",
        "name": "yt_query",
        "timestamp": "2026-01-02T03:04:05.500Z",
        "batchId": 7,
        "numInputRows": 30,
        "durationMs": {"triggerExecution": 1500, "addBatch": 1000},
        "eventTime": {},
        "stateOperators": [],
        "sources": [
            {
                "description": "yt",
                "startOffset": {**offset, "partitions": {"0": 9, "1": -1}},
                "endOffset": {**offset, "partitions": {"0": 29, "1": 9}},
                # Python data sources report offsets as JSON strings in the dict form.
                "latestOffset": json.dumps({**offset, "partitions": {"0": 99, "1": 9}}),
                "numInputRows": 30,
            }
        ],
        "sink": {"description": "yt", "numOutputRows": -1},
    }
    data.update(overrides)
    return data


def test_real_stateful_progress_parses_every_exported_field() -> None:
    progress = parse_progress(REAL_RATE_WINDOW_PROGRESS)

    assert progress.query == "rate_window"
    assert progress.id == "a08bc8ac-4fec-4f54-b959-bce19e763fff"
    assert progress.run_id == "f9f9aed6-31a7-46c2-bb26-296ba9b16a54"
    assert progress.batch_id == 2
    assert progress.timestamp == parse_timestamp("2026-11-22T02:23:16.875Z")
    assert progress.durations_seconds["triggerExecution"] == pytest.approx(1.457)
    assert set(progress.durations_seconds) >= {"addBatch", "getBatch", "latestOffset", "walCommit"}
    assert progress.num_input_rows == 100
    assert progress.input_rows_per_second == pytest.approx(52.6)
    assert progress.processed_rows_per_second == pytest.approx(68.6)
    assert progress.sink_output_rows == 2
    assert progress.watermark_delay_seconds == pytest.approx(4.467)
    [operator] = progress.state_operators
    assert (operator.name, operator.num_rows_total, operator.memory_used_bytes) == ("stateStoreSave_0", 5, 2736)


def test_rate_source_offsets_are_not_mistaken_for_yt_offsets() -> None:
    progress = parse_progress(REAL_RATE_WINDOW_PROGRESS)

    assert progress.sources[0].num_input_rows == 100
    assert progress.partitions == ()
    assert progress.backlog_rows is None


def test_epoch_watermark_means_no_watermark_yet() -> None:
    data = json.loads(REAL_RATE_WINDOW_PROGRESS)
    data["eventTime"] = {"watermark": "1970-01-01T00:00:00.000Z"}

    assert parse_progress(data).watermark_delay_seconds is None


def test_query_without_name_is_known_by_its_id() -> None:
    assert parse_progress(yt_progress(name=None)).query == "11111111-1111-1111-1111-111111111111"


def test_sink_without_row_count_reports_none_instead_of_minus_one() -> None:
    assert parse_progress(yt_progress()).sink_output_rows is None


def test_missing_or_nan_rates_are_unknown() -> None:
    progress = parse_progress(yt_progress(inputRowsPerSecond=math.nan))

    assert progress.input_rows_per_second is None
    assert progress.processed_rows_per_second is None


def test_yt_offsets_give_per_partition_end_latest_and_backlog() -> None:
    progress = parse_progress(yt_progress())

    assert progress.partitions == (
        PartitionOffsets(queue="//home/q", partition=0, start=9, end=29, latest=99),
        PartitionOffsets(queue="//home/q", partition=1, start=-1, end=9, latest=9),
    )
    assert progress.backlog_rows == 70


def test_backlog_is_never_negative() -> None:
    assert PartitionOffsets("//q", 0, start=None, end=50, latest=40).backlog_rows == 0


def test_backlog_is_unknown_without_latest_offset() -> None:
    data = yt_progress()
    data["sources"][0]["latestOffset"] = None  # type: ignore[index]

    assert parse_progress(data).backlog_rows is None


@pytest.mark.parametrize(
    "value",
    [None, 42, "not json", "[1, 2]", {"path": "//q"}, {"path": "//q", "partitions": {"x": 1}}, {"partitions": {}}],
)
def test_offsets_of_other_shapes_are_ignored(value: object) -> None:
    assert QueueOffset.from_progress(value) is None


def test_yt_offset_string_and_dict_forms_agree() -> None:
    offset = {"cluster": "local", "path": "//home/q", "consumer_path": "//home/c", "partitions": {"0": 41, "1": -1}}

    parsed = QueueOffset.from_progress(json.dumps(offset))

    assert parsed == QueueOffset.from_progress(offset)
    assert parsed is not None
    assert (parsed.cluster, parsed.path, parsed.consumer_path) == ("local", "//home/q", "//home/c")
    assert dict(parsed.partitions) == {0: 41, 1: -1}


def test_summary_is_json_serialisable() -> None:
    summary = parse_progress(yt_progress()).summary()

    assert json.loads(json.dumps(jsonable(summary)))["backlog_rows"] == 70


@pytest.mark.spark
def test_progress_of_a_live_stateful_query_parses(spark) -> None:
    """Capture progress from a real query now, so a Spark upgrade that changes the format shows up."""
    events = windowed_rate_counts(spark, rows_per_second=100)
    query = events.writeStream.format("memory").queryName("live_progress").outputMode("append").start()
    try:
        last = wait_until(lambda: (p := query.lastProgress) is not None and p.batchId >= 2 and p, 30,
                          "the progress of batch 2")
    finally:
        query.stop()

    parsed = parse_progress(last.json)
    assert parsed.query == "live_progress"
    assert parsed.batch_id >= 2
    assert "triggerExecution" in parsed.durations_seconds
    assert parsed.state_operators and parsed.state_operators[0].name.endswith("_0")
