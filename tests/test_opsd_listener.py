"""The listener: never blocks or raises into Spark, and records real queries' events as metrics."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry
from pyspark.sql.streaming.listener import QueryStartedEvent, QueryTerminatedEvent
from structlog.testing import capture_logs

from opsd.observe.listener import OpsdListener, _SparkCalls
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.metrics import Metrics
from tests.support.spark import windowed_rate_counts
from tests.support.wait import wait_until


def started_event(name: str = "clicks") -> QueryStartedEvent:
    return QueryStartedEvent(
        id=uuid.uuid4(), runId=uuid.uuid4(), name=name, timestamp="2026-01-01T00:00:00.000Z", jobTags=set()
    )


def make_listener(max_queue: int = 100) -> tuple[OpsdListener, CollectorRegistry, StatusStore]:
    registry, store = CollectorRegistry(), StatusStore()
    metrics = Metrics(registry)
    return OpsdListener(Recorder(metrics, store), metrics, max_queue=max_queue), registry, store


def test_full_queue_drops_and_counts_instead_of_blocking() -> None:
    listener, registry, _ = make_listener(max_queue=1)

    started = time.monotonic()
    with capture_logs() as logs:
        for name in ("a", "b", "c"):
            listener.onQueryStarted(started_event(name))

    assert time.monotonic() - started < 0.5
    assert registry.get_sample_value("opsd_listener_events_total", {"event": "started"}) == 3
    assert registry.get_sample_value("opsd_listener_dropped_events_total") == 2
    assert [entry["event"] for entry in logs] == ["listener_event_dropped"], "one line per run of drops"


def test_unreadable_event_is_counted_and_logged_off_sparks_thread() -> None:
    listener, registry, store = make_listener()
    listener.start()
    try:
        with capture_logs() as logs:
            listener.onQueryTerminated(object())  # type: ignore[arg-type]
            listener.onQueryStarted(started_event("after"))
            assert listener.flush(5)
    finally:
        listener.stop()

    assert registry.get_sample_value("opsd_listener_dropped_events_total") == 1
    assert "listener_event_failed" in [entry["event"] for entry in logs]
    assert store.get("after") is not None, "the consumer keeps going after a bad event"


def test_events_queued_before_start_are_recorded_once_started() -> None:
    listener, _, store = make_listener()
    event = started_event("early")
    listener.onQueryStarted(event)
    listener.onQueryTerminated(QueryTerminatedEvent(event.id, event.runId, None, None))

    listener.start()
    assert listener.flush(5)
    listener.stop()

    status = store.get("early")
    assert status is not None and not status.active and status.terminated_at is not None


class RecordingJavaEvent:
    """A stand-in for a Java progress event reached through Py4J: it records each call made on it."""

    def __init__(self, progress_json: str) -> None:
        self.calls: list[str] = []
        self._json = progress_json

    def progress(self) -> RecordingJavaEvent:
        self.calls.append("progress")
        return self

    def json(self) -> str:
        self.calls.append("json")
        return self._json


def test_sparks_calls_make_no_py4j_call_on_sparks_thread_and_one_json_call_later() -> None:
    listener, registry, store = make_listener()
    event = RecordingJavaEvent(json.dumps({
        "id": str(uuid.uuid4()), "runId": str(uuid.uuid4()), "name": "raw", "batchId": 7,
        "timestamp": "2026-01-01T00:00:00.000Z", "numInputRows": 5, "durationMs": {"triggerExecution": 20},
        "sources": [], "sink": {"description": "noop", "numOutputRows": 5}}))

    _SparkCalls(listener).onQueryProgress(event)
    assert event.calls == [], "the bus thread only queues the Java event"

    listener.start()
    assert listener.flush(5)
    listener.stop()
    assert event.calls == ["progress", "json"]
    assert registry.get_sample_value("opsd_listener_events_total", {"event": "progress"}) == 1
    assert store.get("raw") is not None


@pytest.fixture
def attached(spark) -> Iterator[tuple[OpsdListener, CollectorRegistry, StatusStore]]:
    listener, registry, store = make_listener()
    listener.start()
    spark.streams.addListener(listener)
    yield listener, registry, store
    spark.streams.removeListener(listener)
    listener.stop()


@pytest.mark.spark
def test_real_stateful_query_is_exported(spark, attached) -> None:
    listener, registry, store = attached
    counts = windowed_rate_counts(spark, rows_per_second=200)
    query = counts.writeStream.format("memory").queryName("listener_window").outputMode("append").start()
    try:
        wait_until(lambda: (s := store.get("listener_window")) is not None and (s.last_batch_id or 0) >= 1, 30,
                   "batch 1 in the status")
    finally:
        query.stop()
    wait_until(lambda: not store.get("listener_window").active, 30, "the query to be inactive")  # type: ignore[union-attr]
    assert listener.flush(10)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"query": "listener_window", **labels})

    progresses = query.recentProgress
    assert value("opsd_input_rows_total") == sum(p.numInputRows for p in progresses)
    assert value("opsd_input_rows_total") > 0
    assert value("opsd_last_batch_id") == progresses[-1].batchId
    assert value("opsd_batch_duration_seconds_count", phase="triggerExecution") == len(progresses)
    assert value("opsd_state_rows", operator="stateStoreSave_0") is not None
    assert value("opsd_query_up") == 0
    assert value("opsd_query_terminations_total") == 1
    assert registry.get_sample_value("opsd_listener_events_total", {"event": "started"}) == 1
    assert registry.get_sample_value("opsd_listener_dropped_events_total") == 0
    status = store.get("listener_window")
    assert status is not None and status.id == str(query.id) and not status.failed


@pytest.mark.spark
def test_real_query_failure_is_counted_by_python_exception_class(spark, attached) -> None:
    from pyspark.sql.functions import udf
    from pyspark.sql.utils import StreamingQueryException

    _, registry, store = attached

    @udf("long")
    def explode(value: int) -> int:
        raise ValueError("bad row")

    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        .select(explode("value")).writeStream.format("noop").queryName("listener_failing").start()
    )
    with pytest.raises(StreamingQueryException):
        query.awaitTermination(60)
    wait_until(lambda: (s := store.get("listener_failing")) is not None and s.failed, 30, "the failure in the status")

    assert registry.get_sample_value(
        "opsd_query_failures_total", {"query": "listener_failing", "exception": "ValueError"}
    ) == 1
    assert registry.get_sample_value("opsd_query_up", {"query": "listener_failing"}) == 0


def test_stop_keeps_a_consumer_that_outlived_its_join_and_a_later_stop_waits_for_it() -> None:
    listener, _, _ = make_listener()
    release = threading.Event()
    listener._recorder.record = lambda event: release.wait(30)  # a slow recorder
    listener.start()
    listener._offer("started", lambda: None)  # busy in record() from now on

    consumer = listener._thread
    with capture_logs() as logs:
        listener.stop(timeout=0.2)
    assert [e for e in logs if e["event"] == "listener_stop_timed_out"]
    assert consumer.is_alive() and listener._thread is consumer, "the busy consumer is kept, not forgotten"

    release.set()
    listener.stop(timeout=10)
    assert not consumer.is_alive()
