"""The recorder turns query events and runner/check observations into metrics and status."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.observe.events import QueryIdle, QueryProgressed, QueryStarted, QueryTerminated
from opsd.observe.progress import BatchProgress, SourceProgress, StateOperator
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.metrics import Metrics
from streaming_core.offsets import QueueOffset

QUERY_ID = "11111111-1111-1111-1111-111111111111"


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def recorder(registry: CollectorRegistry, clock: FakeClock) -> Recorder:
    return Recorder(Metrics(registry), StatusStore(), clock=clock)


def batch(batch_id: int = 3, input_rows: int = 30, sink_rows: int | None = 25) -> BatchProgress:
    def offset(rows: dict[int, int]) -> QueueOffset:
        return QueueOffset(cluster="local", path="//home/q", partitions=rows, consumer_path="//home/c")

    return BatchProgress(
        query="clicks",
        id=QUERY_ID,
        run_id="run-1",
        batch_id=batch_id,
        timestamp=990.0,
        durations_seconds={"triggerExecution": 1.5, "addBatch": 1.0},
        num_input_rows=input_rows,
        input_rows_per_second=12.5,
        processed_rows_per_second=20.0,
        sink_output_rows=sink_rows,
        watermark=980.0,
        state_operators=(StateOperator("stateStoreSave_0", 5, 3, 2048, 0),),
        sources=(
            SourceProgress(
                description="yt",
                num_input_rows=input_rows,
                start_offset=offset({0: 9, 1: -1}),
                end_offset=offset({0: 29, 1: 9}),
                latest_offset=offset({0: 99, 1: 9}),
            ),
        ),
    )


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_start_marks_the_query_up_and_remembers_its_id(recorder: Recorder, registry) -> None:
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-1", name="clicks", timestamp=999.0))

    assert value(registry, "opsd_query_up", query="clicks") == 1
    status = recorder.status.get("clicks")
    assert status is not None and status.active and status.started_at == 1_000.0
    assert recorder.status.name_for(QUERY_ID) == "clicks"


def test_progress_exports_every_batch_metric(recorder: Recorder, registry) -> None:
    recorder.record(QueryProgressed(batch(batch_id=3, input_rows=30)))
    recorder.record(QueryProgressed(batch(batch_id=4, input_rows=20)))

    assert value(registry, "opsd_input_rows_total", query="clicks") == 50
    assert value(registry, "opsd_output_rows_total", query="clicks") == 50
    assert value(registry, "opsd_input_rows_per_second", query="clicks") == 12.5
    assert value(registry, "opsd_processed_rows_per_second", query="clicks") == 20.0
    assert value(registry, "opsd_last_batch_id", query="clicks") == 4
    assert value(registry, "opsd_last_progress_timestamp_seconds", query="clicks") == 990.0
    assert value(registry, "opsd_batch_duration_seconds_count", query="clicks", phase="addBatch") == 2
    assert value(registry, "opsd_batch_duration_seconds_sum", query="clicks", phase="triggerExecution") == 3.0
    assert value(registry, "opsd_state_rows", query="clicks", operator="stateStoreSave_0") == 5
    assert value(registry, "opsd_state_memory_bytes", query="clicks", operator="stateStoreSave_0") == 2048
    assert value(registry, "opsd_watermark_delay_seconds", query="clicks") == 10.0


def test_progress_exports_per_partition_offsets_and_backlog(recorder: Recorder, registry) -> None:
    recorder.record(QueryProgressed(batch()))

    first = {"query": "clicks", "queue": "//home/q", "partition": "0"}
    second = {**first, "partition": "1"}
    assert value(registry, "opsd_source_latest_offset", **first) == 99
    assert value(registry, "opsd_source_end_offset", **first) == 29
    assert value(registry, "opsd_source_backlog_rows", **first) == 70
    assert value(registry, "opsd_source_backlog_rows", **second) == 0


def test_progress_updates_the_status_summary(recorder: Recorder, clock: FakeClock) -> None:
    clock.now = 1_234.0
    recorder.record(QueryProgressed(batch(batch_id=8)))

    status = recorder.status.get("clicks")
    assert status is not None
    assert (status.active, status.last_batch_id, status.last_progress_at, status.backlog_rows) == (
        True, 8, 1_234.0, 70,
    )
    assert status.last_progress is not None and status.last_progress.num_input_rows == 30


def test_every_batch_is_one_info_event_with_query_batch_rows_duration_and_backlog(recorder: Recorder) -> None:
    with capture_logs() as logs:
        recorder.record(QueryProgressed(batch(batch_id=8)))

    assert [e for e in logs if e["event"] == "batch_completed"] == [{
        "event": "batch_completed", "log_level": "info", "query": "clicks", "batch_id": 8, "rows": 30,
        "duration_seconds": 1.5, "backlog_rows": 70}]


def test_sink_without_row_count_leaves_output_rows_absent(recorder: Recorder, registry) -> None:
    recorder.record(QueryProgressed(batch(sink_rows=None)))

    assert value(registry, "opsd_output_rows_total", query="clicks") is None


def test_idle_event_is_a_heartbeat_without_batch_progress(recorder: Recorder, clock: FakeClock) -> None:
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-1", name="clicks", timestamp=999.0))
    clock.now = 1_100.0
    recorder.record(QueryIdle(id=QUERY_ID, run_id="run-1", timestamp=1_099.0))

    status = recorder.status.get("clicks")
    assert status is not None
    assert (status.last_heartbeat_at, status.last_progress_at) == (1_100.0, None)


def test_an_idle_query_is_heard_on_metrics_while_its_progress_time_stays(
        recorder: Recorder, registry, clock: FakeClock) -> None:
    """Dashboards show "time since heard from" from this: an idle query must not look stalled."""
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-1", name="clicks", timestamp=999.0))
    clock.now = 1_100.0
    recorder.record(QueryIdle(id=QUERY_ID, run_id="run-1", timestamp=1_099.0))

    assert value(registry, "opsd_last_heard_timestamp_seconds", query="clicks") == 1_100.0
    assert value(registry, "opsd_last_progress_timestamp_seconds", query="clicks") is None


def test_clean_stop_counts_a_termination_but_no_failure(recorder: Recorder, registry) -> None:
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-1", name="clicks", timestamp=999.0))
    recorder.record(QueryTerminated(id=QUERY_ID, run_id="run-1"))

    assert value(registry, "opsd_query_up", query="clicks") == 0
    assert value(registry, "opsd_query_terminations_total", query="clicks") == 1
    status = recorder.status.get("clicks")
    assert status is not None and not status.active and not status.failed


def test_failure_is_counted_by_exception_class(recorder: Recorder, registry) -> None:
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-1", name="clicks", timestamp=999.0))
    recorder.record(
        QueryTerminated(
            id=QUERY_ID,
            run_id="run-1",
            exception="org.apache.spark.SparkException: Traceback (most recent call last):\nValueError: x",
            error_class="PYTHON_EXCEPTION",
        )
    )

    assert value(registry, "opsd_query_failures_total", query="clicks", exception="SparkException") == 1
    status = recorder.status.get("clicks")
    assert status is not None and status.failed and status.exception_class == "SparkException"


def test_restart_clears_the_previous_failure(recorder: Recorder) -> None:
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-1", name="clicks", timestamp=999.0))
    recorder.record(QueryTerminated(id=QUERY_ID, run_id="run-1", exception="java.lang.Error: x"))
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-2", name="clicks", timestamp=1_001.0))

    status = recorder.status.get("clicks")
    assert status is not None and status.active and status.exception is None and status.run_id == "run-2"


def test_termination_of_an_unseen_query_is_recorded_under_its_id(recorder: Recorder, registry) -> None:
    recorder.record(QueryTerminated(id="unseen-id", run_id="r"))

    assert value(registry, "opsd_query_terminations_total", query="unseen-id") == 1


def test_restarts_and_crash_loop_are_counted_and_flagged(recorder: Recorder, registry) -> None:
    recorder.record_restart("clicks", crash_loop=False)
    recorder.record_restart("clicks", crash_loop=True)

    assert value(registry, "opsd_query_restarts_total", query="clicks") == 2
    assert value(registry, "opsd_query_crash_loop", query="clicks") == 1
    status = recorder.status.get("clicks")
    assert status is not None and (status.restarts, status.crash_loop) == (2, True)

    recorder.record_crash_loop("clicks", False)
    assert value(registry, "opsd_query_crash_loop", query="clicks") == 0


def test_tuning_values_are_exported_and_kept_independently(recorder: Recorder, registry) -> None:
    recorder.record_tuning("clicks", max_rows_per_partition=5_000)
    recorder.record_tuning("clicks", dyn_batch_size=200)

    assert value(registry, "opsd_tuning_max_rows_per_partition", query="clicks") == 5_000
    assert value(registry, "opsd_tuning_dyn_batch_size", query="clicks") == 200
    status = recorder.status.get("clicks")
    assert status is not None and (status.max_rows_per_partition, status.dyn_batch_size) == (5_000, 200)


def test_state_changes_are_events_and_repeats_are_not(recorder: Recorder) -> None:
    with capture_logs() as logs:
        recorder.record_tuning("clicks", max_rows_per_partition=5_000, dyn_batch_size=200)
        recorder.record_tuning("clicks", max_rows_per_partition=5_000, dyn_batch_size=200)
        recorder.record_tuning("clicks", dyn_batch_size=100)
        recorder.record_stalled("clicks", True)
        recorder.record_stalled("clicks", True)
        recorder.record_stalled("clicks", False)
        recorder.record_stalled("clicks", False)
        recorder.record_restart("clicks", crash_loop=True)
        recorder.record_crash_loop("clicks", False)
        recorder.record_crash_loop("clicks", False)

    assert [(e["event"], e.get("dyn_batch_size")) for e in logs] == [
        ("tuning_in_force", 200), ("tuning_in_force", 100), ("query_stalled", None), ("query_progressing_again", None),
        ("query_restarted", None), ("query_crash_loop_ended", None)]


def test_registered_pipeline_is_known_but_down(recorder: Recorder, registry) -> None:
    recorder.register("clicks", trigger_interval_seconds=2.0)

    assert value(registry, "opsd_query_up", query="clicks") == 0
    status = recorder.status.get("clicks")
    assert status is not None and status.trigger_interval_seconds == 2.0 and not status.active


def test_anything_but_a_query_event_is_rejected(recorder: Recorder) -> None:
    with pytest.raises(TypeError, match="not a query event"):
        recorder.record("progress")  # type: ignore[arg-type]


def test_an_idle_event_of_a_query_never_seen_started_makes_no_ghost(recorder: Recorder, registry) -> None:
    """Idle events carry only an id: filing one under it would keep /readyz false and query_up{query=<uuid>} at 1."""
    recorder.record(QueryIdle(id=QUERY_ID, run_id="run-1", timestamp=1_099.0))

    assert recorder.status.snapshot() == {}
    assert value(registry, "opsd_query_up", query=QUERY_ID) is None


def test_a_query_running_before_attach_is_known_by_name_and_its_idle_events_count(
        recorder: Recorder, registry, clock: FakeClock) -> None:
    recorder.record_running("clicks", QUERY_ID, "run-1")
    clock.now = 1_050.0
    recorder.record(QueryIdle(id=QUERY_ID, run_id="run-1", timestamp=1_049.0))

    assert list(recorder.status.snapshot()) == ["clicks"]
    assert recorder.status.get("clicks").last_heartbeat_at == 1_050.0
    assert value(registry, "opsd_query_up", query="clicks") == 1


@pytest.mark.parametrize("counter", ["opsd_query_restarts_total", "opsd_query_terminations_total"])
def test_lifecycle_counters_exist_at_zero_from_a_querys_registration_and_start(
        recorder: Recorder, registry, counter: str) -> None:
    """increase() over a counter whose first sample is 1 is 0: alerts would miss the first restart."""
    recorder.register("planned")
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-1", name="clicks", timestamp=999.0))

    assert value(registry, counter, query="planned") == 0
    assert value(registry, counter, query="clicks") == 0


@pytest.mark.parametrize("gauge", ["opsd_query_crash_loop", "opsd_query_stalled", "opsd_query_failed_permanently"])
def test_state_gauges_exist_at_zero_from_a_querys_start_and_a_restart_keeps_their_state(
        recorder: Recorder, registry, gauge: str) -> None:
    """A "crash loop" or "stalled" panel must read 0 for a healthy query, not "No data"."""
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-1", name="clicks", timestamp=999.0))
    recorder.record_running("attached", "other-id", "run-9")

    assert value(registry, gauge, query="clicks") == 0 and value(registry, gauge, query="attached") == 0
    family = {"opsd_query_crash_loop": recorder.metrics.query_crash_loop, "opsd_query_stalled":
              recorder.metrics.query_stalled, "opsd_query_failed_permanently":
              recorder.metrics.query_failed_permanently}[gauge]
    family.labels(query="clicks").set(1)
    recorder.record(QueryStarted(id=QUERY_ID, run_id="run-2", name="clicks", timestamp=1_000.0))
    assert value(registry, gauge, query="clicks") == 1, "a restart's start event does not clear the state"
