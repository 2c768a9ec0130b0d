"""The scheduled OOM check on a real query: peaks read from Spark's REST API, the next batch planned from the last
progress and the cap in force, risk and safe cap recorded as metrics and status; a memory failure is learned."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

import opsd
from opsd.checks.oom.check import OomCheck
from opsd.checks.oom.collect import SparkRest
from opsd.collect.positions import PositionsCollector
from opsd.config.models import OpsdConfig
from tests.support.cluster import make_queue
from tests.support.wait import wait_until

ROWS_PER_PARTITION = 3000
CAP = 1000


@pytest.fixture
def watched(spark, yt, yt_root, cluster_uri, tmp_path):
    """A yt query that read one capped batch of a 2-partition queue, seen by an attached monitor."""
    queue, consumer = f"{yt_root}/q", f"{yt_root}/c"
    make_queue(yt, queue, consumer=consumer)
    for tablet in (0, 1):
        yt.insert_rows(queue, pa.table({"data": ["x" * 100] * ROWS_PER_PARTITION,
                                        "n": list(range(ROWS_PER_PARTITION))}), tablet_index=tablet)
    monitor = opsd.attach(spark, registry=CollectorRegistry(), port=None)

    def slowly(batches):
        time.sleep(1.0)  # tasks longer than Spark's metrics polling interval (200 ms): their peaks are measured
        yield from batches

    read = spark.readStream.format("yt").option("consumer_path", consumer).option("max_rows_per_partition", CAP)
    df = read.load(queue)
    query = (df.mapInArrow(slowly, df.schema).writeStream.format("noop").queryName("oom_watched")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="1 hour").start())
    wait_until(lambda: query.lastProgress is not None, 120, "the first capped batch")  # the next is an hour away
    query.stop()
    monitor.listener.flush(10)
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [
        {"name": "oom_watched", "source": {"path": queue, "options": {"consumer_path": consumer}},
         "sink": {"format": "console"}}]})
    rest = SparkRest(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId)
    check = OomCheck(monitor.recorder, PositionsCollector(config.cluster), config, rest,
                     dict(spark.sparkContext.getConf().getAll()))
    yield monitor, check
    monitor.detach()


@pytest.mark.spark
def test_the_next_batch_is_judged_from_the_measured_peaks_and_the_cap_in_force(watched):
    monitor, check = watched
    monitor.recorder.record_tuning("oom_watched", max_rows_per_partition=CAP)
    evaluation = check.run()["oom_watched"]

    assert sorted(evaluation.batch.rows_per_partition.values()) == [CAP, CAP]
    heap = next(p for p in evaluation.pools if p.pool == "jvm_heap")
    assert heap.observed_peak_bytes and heap.observed_peak_bytes > 0  # Spark measured the batch
    assert heap.model.observations == 1
    registry = monitor.metrics.registry
    risk = registry.get_sample_value("opsd_oom_risk", {"query": "oom_watched", "pool": "jvm_heap"})
    assert risk == pytest.approx(heap.risk)
    assert registry.get_sample_value("opsd_oom_batch_bytes", {"query": "oom_watched"}) == evaluation.batch.bytes
    assert monitor.recorder.status.get("oom_watched").oom.risk == evaluation.risk
    # /status carries the verdict with its confidence: the expected peak inside its interval, the bound = risk x limit.
    shown = monitor.recorder.status.to_json()["queries"]["oom_watched"]["oom"]
    assert shown["confidence"] == check.settings.confidence == 0.99 and shown["risk"] == evaluation.risk
    heap_shown = shown["pools"]["jvm_heap"]
    low, high = heap_shown["peak_interval_bytes"]
    assert low <= heap_shown["predicted_peak_bytes"] <= high == pytest.approx(heap.risk * heap.limit_bytes)
    assert heap_shown["measured_by"] == "spark_metrics" and heap_shown["observations"] == 1
    assert registry.get_sample_value("opsd_oom_peak_bound_bytes", {"query": "oom_watched", "pool": "jvm_heap"}) == high
    assert 0 <= registry.get_sample_value("opsd_oom_exceed_probability",
                                          {"query": "oom_watched", "pool": "jvm_heap"}) <= 1
    assert check.run()["oom_watched"].pools[0].model.observations == 1  # one observation per batch, not per run


@pytest.mark.spark
def test_a_failure_of_memory_is_counted_and_learned_at_the_pools_limit(watched):
    monitor, check = watched
    before = next(p for p in check.run()["oom_watched"].pools if p.pool == "jvm_heap").model.observations
    monitor.recorder.status.update("oom_watched", active=False, terminated_at=123.0,
                                   exception="java.lang.OutOfMemoryError: Java heap space")
    evaluation = check.run()["oom_watched"]

    heap = next(p for p in evaluation.pools if p.pool == "jvm_heap")
    # The failed batch is one more observation (at the limit), whether or not Spark had measured the batch before
    # it: a stage shorter than the metrics' polling interval may carry no peak.
    assert heap.model.observations == before + 1
    assert monitor.metrics.registry.get_sample_value(
        "opsd_memory_failures_total", {"query": "oom_watched", "pool": "jvm_heap"}) == 1
