"""Backlog, lag in seconds and time to drain: pure evaluation over samples, `$timestamp` on the embedded cluster, and
the scheduled check recording them."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.lag.check import LagCheck
from opsd.checks.lag.collect import Timestamps, timestamp_seconds
from opsd.checks.lag.evaluate import evaluate, row_written_at
from opsd.checks.lag.facts import PartitionSample, Point, QuerySample
from opsd.checks.lag.history import History
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore, jsonable
from opsd.telemetry.metrics import Metrics
from tests.support.checkpoint import write_checkpoint
from tests.support.cluster import make_queue
from ytsaurus_standin.errors import GENERIC
from ytsaurus_standin.http import Fault


def sample(at: float, next_row: int, row_count: int, *, written_at: float | None = None,
           trimmed: int = 0) -> QuerySample:
    return QuerySample("q", at, (PartitionSample("//q", 0, next_row, row_count, trimmed, written_at),))


def test_nothing_unread_is_zero_lag_even_on_a_queue_idle_for_an_hour() -> None:
    history = [Point.of(sample(0.0, 100, 100))]

    lag = evaluate(sample(3600.0, 100, 100), history, 300)

    assert (lag.partitions[0].unread_rows, lag.partitions[0].lag_seconds, lag.time_to_drain_seconds) == (0, 0.0, 0.0)


def test_lag_is_the_age_of_the_next_row_from_its_timestamp() -> None:
    lag = evaluate(sample(1000.0, 10, 50, written_at=940.0), [], 300)

    assert (lag.partitions[0].unread_rows, lag.partitions[0].lag_seconds) == (40, 60.0)


def test_without_timestamp_the_row_time_is_interpolated_from_the_sampled_history() -> None:
    points = [Point.of(sample(t, 0, count)) for t, count in ((0.0, 0), (100.0, 100), (200.0, 300))]

    assert row_written_at(149, ("//q", 0), points) == 125.0  # row 149 is the 50th of 200 rows written in (100, 200]
    assert row_written_at(0, ("//q", 0), points[1:]) == 100.0  # older than the history: at least its age
    assert evaluate(sample(300.0, 149, 300), points, 600).partitions[0].lag_seconds == 175.0


def test_time_to_drain_uses_rates_averaged_over_the_window() -> None:
    history = [Point.of(sample(0.0, 0, 0)), Point.of(sample(20.0, 10, 990))]  # before the window
    history += [Point.of(sample(100.0, 100, 1000))]

    lag = evaluate(sample(200.0, 600, 1300), history, 150)  # read 5 rows/s, written 3 rows/s

    assert (lag.processed_rows_per_second, lag.input_rows_per_second) == (5.0, 3.0)
    assert lag.time_to_drain_seconds == 700 / 2


def test_a_query_that_is_not_draining_has_infinite_time_to_drain() -> None:
    lag = evaluate(sample(100.0, 50, 400), [Point.of(sample(0.0, 0, 200))], 300)

    assert math.isinf(lag.time_to_drain_seconds) and jsonable(lag)["time_to_drain_seconds"] == "+Inf"


def test_the_history_keeps_spaced_points_within_its_reach() -> None:
    history = History(history_seconds=100, window_seconds=1000)  # spacing 100/240 s
    for t in range(0, 300):
        history.add("q", Point.of(sample(float(t), 0, t)))

    points = history.points("q")
    assert points[0].at >= 199 and points[-1].at == 299 and len(points) == 101


@pytest.mark.parametrize(("value", "seconds"), [(1_795_389_897_044_000, 1_795_389_897.044),
                                                 (1_795_389_897 << 30 | 12345, 1_795_389_897.0)])
def test_timestamps_of_both_backends_read_as_unix_seconds(value: int, seconds: float) -> None:
    assert timestamp_seconds(value) == pytest.approx(seconds)


def test_the_check_reads_timestamps_of_unread_rows_and_records_lag(yt, yt_root: str, cluster_uri: str,
                                                                   tmp_path: Path) -> None:
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, consumer=c, schema=[{"name": "$timestamp", "type": "uint64"},
                                          {"name": "data", "type": "string"}])
    yt.insert_rows(q, [{"data": "x"}] * 40)
    location = write_checkpoint(tmp_path / "cp", q, {0: {0: 19, 1: -1}}, committed=0, consumer=c)
    registry = CollectorRegistry()
    recorder = Recorder(Metrics(registry), StatusStore())
    now = time.time() + 30

    positions = PositionsCollector(cluster_uri, [QueryTarget("job", str(location))], clock=lambda: now)
    [lag] = LagCheck(recorder, positions).run()

    assert [(p.unread_rows, p.lag_seconds == pytest.approx(30, abs=5)) for p in lag.partitions] == [(0, False),
                                                                                                   (20, True)]
    labels = {"query": "job", "queue": q, "partition": "1"}
    assert registry.get_sample_value("opsd_queue_unread_rows", labels) == 20
    assert registry.get_sample_value("opsd_queue_lag_seconds", {**labels, "partition": "0"}) == 0
    assert recorder.status.get("job").lag.backlog_rows == 20
    assert recorder.status.to_json()["queries"]["job"]["lag"]["backlog_rows"] == 20


def test_a_partition_behind_on_the_first_sample_has_unknown_lag_not_zero() -> None:
    assert evaluate(sample(100.0, 10, 50), [], 300).partitions[0].lag_seconds is None


def test_timestamps_are_read_within_a_budget_per_run_and_remembered(yt, yt_root: str) -> None:
    q = f"{yt_root}/queue"
    make_queue(yt, q, schema=[{"name": "$timestamp", "type": "uint64"}, {"name": "data", "type": "string"}])
    yt.insert_rows(q, [{"data": "x"}] * 4)
    stamps, rows = Timestamps(budget=1), [t.total_row_count for t in yt.get_tablet_infos(q)]

    stamps.start_run()
    first = [stamps.of(yt, q, p, 0, rows[p]) for p in (0, 1)]
    stamps.start_run()
    second = [stamps.of(yt, q, p, 0, rows[p]) for p in (0, 1)]

    assert first[0] is not None and first[1] is None
    assert second == [first[0], pytest.approx(time.time(), abs=60)]


def test_a_timestamp_read_that_failed_is_read_again_at_the_next_run(standin, standin_cluster) -> None:
    q = "//tmp/lag-failed-read/queue"
    make_queue(standin_cluster, q,
               schema=[{"name": "$timestamp", "type": "uint64"}, {"name": "data", "type": "string"}])
    standin_cluster.insert_rows(q, [{"data": "x"}] * 4)
    stamps, rows = Timestamps(), [t.total_row_count for t in standin_cluster.get_tablet_infos(q)]
    standin.faults.append(Fault("select_rows", status=400, code=GENERIC, times=1))

    stamps.start_run()
    failed = stamps.of(standin_cluster, q, 0, 0, rows[0])
    stamps.start_run()
    again = stamps.of(standin_cluster, q, 0, 0, rows[0])

    assert failed is None and again == pytest.approx(time.time(), abs=60)
