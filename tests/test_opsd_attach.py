"""`opsd.attach(spark)` on queries a user started: scrape /metrics and /status over HTTP, then `detach()`."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql.streaming import StreamingQuery

import opsd
from tests.support.cluster import make_queue
from tests.support.ports import taken_port
from tests.support.wait import wait_until

WAIT_SECONDS = 120.0


@pytest.fixture
def monitor(spark) -> Iterator[opsd.Monitor]:
    attached = opsd.attach(spark, registry=CollectorRegistry(), port=0)
    yield attached
    attached.detach()


@pytest.fixture
def queries() -> Iterator[list[StreamingQuery]]:
    """The user's queries of a test, stopped afterwards."""
    started: list[StreamingQuery] = []
    yield started
    for query in started:
        query.stop()


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def scrape(monitor: opsd.Monitor) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics over HTTP, parsed: (sample name, sorted labels) -> value."""
    text = get(f"{monitor.url}/metrics").decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def rate_query(spark, name: str) -> StreamingQuery:
    return (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
            .writeStream.format("noop").queryName(name).trigger(processingTime="500 milliseconds").start())


def test_scrape_shows_rows_durations_and_per_partition_backlog_of_a_yt_query(
        spark, yt, yt_root, monitor: opsd.Monitor, queries: list[StreamingQuery]) -> None:
    queue, consumer, name = f"{yt_root}/queue", f"{yt_root}/consumer", f"user_{uuid.uuid4().hex[:8]}"
    make_queue(yt, queue, consumer=consumer)
    for tablet in (0, 1):
        yt.insert_rows(queue, [{"data": f"r{i}", "n": i} for i in range(40)], tablet_index=tablet)
    queries.append(spark.readStream.format("yt").option("consumer_path", consumer)
                   .option("max_rows_per_partition", 15).load(queue)
                   .writeStream.format("memory").queryName(name).trigger(processingTime="200 milliseconds").start())

    wait_until(lambda: sample(scrape(monitor), "opsd_input_rows_total", query=name) == 80, WAIT_SECONDS,
               "all 80 rows to be counted")
    samples = scrape(monitor)

    assert sample(samples, "opsd_batch_duration_seconds_count", query=name, phase="triggerExecution") >= 3, \
        "at most 15 rows per partition and batch: at least 3 batches"
    for partition in ("0", "1"):
        labels = {"query": name, "queue": queue, "partition": partition}
        assert sample(samples, "opsd_source_latest_offset", **labels) == 39
        assert sample(samples, "opsd_source_end_offset", **labels) == 39
        assert sample(samples, "opsd_source_backlog_rows", **labels) == 0
    status = json.loads(get(f"{monitor.url}/status"))["queries"][name]
    assert status["active"] and status["last_batch_id"] >= 2 and status["backlog_rows"] == 0


def test_detach_removes_the_listener_and_closes_the_endpoint(
        spark, monitor: opsd.Monitor, queries: list[StreamingQuery]) -> None:
    name = f"rate_{uuid.uuid4().hex[:8]}"
    queries.append(rate_query(spark, name))
    wait_until(lambda: (sample(scrape(monitor), "opsd_input_rows_total", query=name) or 0) > 0, WAIT_SECONDS,
               "rows of the rate query to be counted")
    url, registry = monitor.url, monitor.metrics.registry

    monitor.detach()
    after_detach = registry.get_sample_value("opsd_listener_events_total", {"event": "progress"})
    rows_after_detach = registry.get_sample_value("opsd_input_rows_total", {"query": name})
    batch = queries[0].lastProgress["batchId"]
    wait_until(lambda: queries[0].lastProgress["batchId"] >= batch + 2, WAIT_SECONDS, "two more batches")

    assert registry.get_sample_value("opsd_listener_events_total", {"event": "progress"}) == after_detach
    assert registry.get_sample_value("opsd_input_rows_total", {"query": name}) == rows_after_detach
    with pytest.raises(urllib.error.URLError):
        get(f"{url}/metrics")


def test_a_recorder_that_raises_never_breaks_the_query(
        spark, monitor: opsd.Monitor, queries: list[StreamingQuery], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(event: object) -> None:
        raise RuntimeError("recorder bug")

    monkeypatch.setattr(monitor.recorder, "record", broken)
    query = rate_query(spark, f"survivor_{uuid.uuid4().hex[:8]}")
    queries.append(query)

    wait_until(lambda: (query.lastProgress or {}).get("batchId", -1) >= 3, WAIT_SECONDS, "four batches")
    assert monitor.listener.flush(10)

    assert query.isActive and query.exception() is None
    assert monitor.metrics.registry.get_sample_value("opsd_listener_dropped_events_total") >= 4
    assert sample(scrape(monitor), "opsd_listener_dropped_events_total") >= 4, "the error shows on /metrics"


def test_attach_to_a_query_already_running_and_idle_files_it_under_its_name_only(
        spark, yt, yt_root, queries: list[StreamingQuery]) -> None:
    """Idle events carry no name: before the fix the first one filed a ghost under the query id, which kept
    /readyz false and opsd_query_up{query="<uuid>"} at 1."""
    queue, consumer, name = f"{yt_root}/idle_q", f"{yt_root}/idle_c", f"idle_{uuid.uuid4().hex[:8]}"
    make_queue(yt, queue, consumer=consumer)
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "200ms")
    try:
        query = (spark.readStream.format("yt").option("consumer_path", consumer).load(queue)
                 .writeStream.format("noop").queryName(name).trigger(processingTime="100 milliseconds").start())
        queries.append(query)
        wait_until(lambda: query.lastProgress is not None, WAIT_SECONDS, "the first (empty) batch")
        attached = opsd.attach(spark, registry=CollectorRegistry(), port=0)
        try:
            wait_until(lambda: (attached.metrics.registry.get_sample_value(
                "opsd_listener_events_total", {"event": "idle"}) or 0) >= 3, WAIT_SECONDS, "idle events")
            assert attached.listener.flush(10)
            statuses = json.loads(get(f"{attached.url}/status"))["queries"]
            assert list(statuses) == [name]
            assert statuses[name]["active"] and statuses[name]["last_heartbeat_at"] is not None
            readiness = json.loads(get(f"{attached.url}/readyz"))
            assert readiness["ready"] and readiness["degraded"] == []
            assert sample(scrape(attached), "opsd_query_up", query=str(query.id)) is None
        finally:
            attached.detach()
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")


def test_attach_on_a_taken_port_fails_and_leaves_nothing_running(spark) -> None:
    with taken_port() as port:
        listeners_before = len(spark._jsparkSession.streams().listListeners())
        threads_before = {t.name for t in threading.enumerate()}

        with pytest.raises(OSError):
            opsd.attach(spark, registry=CollectorRegistry(), port=port)

    assert len(spark._jsparkSession.streams().listListeners()) == listeners_before
    assert {t.name for t in threading.enumerate() if t.is_alive()} - threads_before == set()


@pytest.mark.hostile
def test_attach_guards_its_endpoint_and_logs_through_the_scripts_logging_with_plain_redacted_tracebacks(
        spark, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path) -> None:
    import logging

    import structlog

    token = "AQAD-attach-library-token-0123456789"
    monkeypatch.setenv("YT_TOKEN", token)
    structlog.reset_defaults()  # a script that never configured structlog
    token_file = tmp_path / "bearer"
    token_file.write_text("attach-bearer-Zz9")
    attached = opsd.attach(spark, registry=CollectorRegistry(), port=0, bearer_token_file=str(token_file))
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{attached.url}/status", timeout=10)
        assert refused.value.code == 401
        asked = urllib.request.Request(f"{attached.url}/status", headers={"Authorization": "Bearer attach-bearer-Zz9"})
        with urllib.request.urlopen(asked, timeout=10) as answer:
            assert answer.status == 200
        def handle_batch() -> None:
            secret = token  # a local: a traceback with locals would show it
            raise RuntimeError(f"Authorization: OAuth {secret}")

        with caplog.at_level(logging.INFO):
            try:
                handle_batch()
            except RuntimeError:
                structlog.get_logger("opsd.script").exception("batch_failed")
    finally:
        attached.detach()
        structlog.reset_defaults()
    [record] = [r for r in caplog.records if "batch_failed" in r.getMessage()]
    assert record.name == "opsd.script" and record.exc_info is None
    assert "handle_batch" in record.getMessage() and "secret = " not in record.getMessage()
    assert token not in caplog.text


@pytest.mark.hostile
def test_an_attached_query_failing_with_the_token_in_its_error_never_shows_it(
        spark, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        queries: list[StreamingQuery]) -> None:
    """A script's own query, watched by `opsd.attach`, fails with an error quoting the token (a sink that echoes the
    credentials it got, whole and in part): `/status`, `/readyz`, `/metrics` and the script's log lines tell the
    failure, never the token nor any 8 characters of it."""
    import logging

    import structlog

    token = "AQAD-Zq81Hx02Lm55Pw19Rt66Nv44Kc07"
    monkeypatch.setenv("YT_TOKEN", token)
    structlog.reset_defaults()  # a script that never configured structlog

    def write(df, batch_id: int) -> None:
        raise RuntimeError(f"sink refused credentials {token}; the proxy saw ...{token[-15:]}")

    name = f"attached_failing_{uuid.uuid4().hex[:8]}"
    attached = opsd.attach(spark, registry=CollectorRegistry(), port=0)
    try:
        with caplog.at_level(logging.DEBUG):
            query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load().writeStream
                     .foreachBatch(write).queryName(name).trigger(processingTime="200 milliseconds").start())
            queries.append(query)
            wait_until(lambda: b"sink refused" in get(f"{attached.url}/status"), WAIT_SECONDS,
                       "the failure to reach /status")
            documents = {path: get(f"{attached.url}{path}").decode() for path in ("/status", "/readyz", "/metrics")}
    finally:
        attached.detach()
        structlog.reset_defaults()
    told = documents | {"log": caplog.text}

    assert "sink refused credentials ***" in documents["/status"]
    assert {where: [token[i:i + 8] for i in range(len(token) - 7) if token[i:i + 8] in text]
            for where, text in told.items()} == {where: [] for where in told}
