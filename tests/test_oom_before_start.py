"""The first batch of a run is capped by the OOM model, not by a fixed guess: before the runner starts a query, the
OOM check judges the batch it would plan (from where its consumer stands, with the bytes of the rows ahead of it,
or after a memory failure from its last batch with the failure observed first), and the tuner, called after it,
caps the query at the safe cap it recorded."""

from __future__ import annotations

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.autotune.check import AutotuneCheck
from opsd.checks.autotune.check import targets_for as autotune_targets
from opsd.checks.oom.check import OomCheck
from opsd.checks.oom.collect import SparkRest, next_partitions, sample_bytes_per_row
from opsd.checks.oom.evaluate import PlannedBatch
from opsd.collect.positions import PositionsCollector
from opsd.config.models import OpsdConfig
from opsd.observe.progress import PartitionOffsets
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.runtime.runner import Supervisor
from opsd.telemetry.metrics import Metrics
from streaming_core.consumer import advance_consumer
from streaming_core.tuning import read_tuning, write_tuning
from tests.support.cluster import make_queue

SMALL, BIG = 10, 2000  # bytes of `data` in the rows already read and in the rows ahead
READ, AHEAD = 1000, 20_000  # rows per partition
SPARK_CONF = {"spark.master": "local[2]", "spark.driver.memory": "512m"}
OOM = "org.apache.spark.SparkException: Task failed: java.lang.OutOfMemoryError: Java heap space"


class NoSparkUi(SparkRest):
    """The Spark UI of a query that has not started: nothing to read (the pre-start verdict must not ask)."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9", "none")

    def stages(self) -> list[dict]:
        return []


@pytest.fixture
def started(yt, yt_root, cluster_uri):
    """A 2-partition queue: `READ` small rows per partition the consumer is past, `AHEAD` big ones it is not; the
    OOM check and the tuner of a pipeline that reads it, and the recorder they share."""
    queue, consumer = f"{yt_root}/q", f"{yt_root}/c"
    make_queue(yt, queue, consumer=consumer)
    for tablet in (0, 1):
        for size, rows in ((SMALL, READ), (BIG, AHEAD)):
            yt.insert_rows(queue, pa.table({"data": ["x" * size] * rows, "n": list(range(rows))}),
                           tablet_index=tablet)
    advance_consumer(yt, consumer, queue, {0: READ, 1: READ})
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [{
        "name": "p", "source": {"path": queue, "options": {"consumer_path": consumer}},
        "sink": {"format": "console"}, "restart": {"initial_backoff_seconds": 0.01}}]})
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    oom = OomCheck(recorder, PositionsCollector(config.cluster), config, NoSparkUi(), SPARK_CONF)
    tuner = AutotuneCheck(recorder, PositionsCollector(cluster_uri), autotune_targets(config))
    return config, recorder, oom, tuner, f"{yt_root}/c_tuning"


def test_the_rows_ahead_of_the_consumer_are_what_a_query_about_to_start_is_judged_by(yt, yt_root, started):
    queue = f"{yt_root}/q"
    partitions = next_partitions(yt, queue, f"{yt_root}/c")
    total = READ + AHEAD
    assert partitions == [PartitionOffsets(queue, 0, None, READ - 1, total - 1),
                          PartitionOffsets(queue, 1, None, READ - 1, total - 1)]
    ahead = sample_bytes_per_row(yt, partitions, ahead=True)
    behind = sample_bytes_per_row(yt, partitions)
    assert ahead > BIG > behind  # the rows the first batch will read, not the ones before them
    nothing_ahead = [PartitionOffsets(queue, 0, None, total - 1, total - 1)]
    assert sample_bytes_per_row(yt, nothing_ahead, ahead=True) is None


def test_a_query_that_never_ran_starts_capped_by_the_models_safe_cap(yt, started):
    _, recorder, oom, tuner, document = started
    verdict = oom.before_start("p")

    # Uncapped, the first batch would read the whole backlog: over the risk target; at the safe cap it is under it,
    # and just above the cap over it again.
    assert sum(verdict.batch.rows_per_partition.values()) == 2 * AHEAD
    assert verdict.risk > verdict.target_risk
    cap = verdict.safe_max_rows_per_partition
    assert 0 < cap < AHEAD

    def risk_at(rows: int) -> float:
        batch = PlannedBatch({("q", 0): rows, ("q", 1): rows}, verdict.batch.bytes_per_row, rows)
        return max(p.bound_at(batch.bytes, verdict.confidence) / p.limit_bytes for p in verdict.pools)

    assert risk_at(cap) <= verdict.target_risk < risk_at(int(cap * 1.1) + 1)
    status = recorder.status.get("p")
    assert (status.oom.safe_max_rows_per_partition, status.oom.risk) == (cap, verdict.risk)
    assert not status.active and status.partitions == ()  # judged, not pretended to have run

    tuner.before_start("p")
    tuning = read_tuning(yt, document)
    assert tuning.max_rows_per_partition == cap
    assert recorder.status.get("p").autotune["max_rows_per_partition"].decision.reason == "first_batch_safe"
    # and memory's own guard, the byte cap, at the model's safe bytes (the row cap's bound at any row width)
    assert tuning.max_bytes_per_partition == verdict.safe_max_bytes_per_partition


def test_the_supervisor_asks_the_oom_check_first_and_a_failing_hook_stops_nothing(yt, started):
    config, recorder, oom, tuner, document = started
    calls: list[str] = []
    caps: list[int | None] = []

    def broken(query: str, failure: str | None) -> None:
        calls.append("broken")
        raise RuntimeError("a hook that fails")

    def start(spark, pipeline):
        caps.append(read_tuning(yt, document).max_rows_per_partition)
        return FinishedQuery()

    supervisor = Supervisor(None, config.pipelines[0], recorder, start=start,
                            before_start=[broken, oom.before_start, tuner.before_start])
    supervisor.start()
    assert supervisor.finished.wait(10)
    assert calls == ["broken"]
    assert caps == [recorder.status.get("p").oom.safe_max_rows_per_partition] and caps[0] < AHEAD


def test_a_restart_after_a_memory_failure_observes_the_failure_before_the_tuner_cuts(yt, started):
    config, recorder, oom, tuner, document = started
    first = oom.before_start("p")
    tuner.before_start("p")
    cap = first.safe_max_rows_per_partition
    queue = config.pipelines[0].source.path
    # The run read one batch at the cap, then died of memory; the listener has not recorded the failure yet.
    recorder.status.update("p", active=False, run_id="run-1", last_batch_id=0, max_rows_per_partition=cap,
                           partitions=(PartitionOffsets(queue, 0, READ - 1, READ + cap - 1, READ + AHEAD - 1),
                                       PartitionOffsets(queue, 1, READ - 1, READ + cap - 1, READ + AHEAD - 1)))
    oom.run()  # the batch planned next, at the cap: what died
    after = oom.before_start("p", OOM)

    heap = next(p for p in after.pools if p.pool == "jvm_heap")
    assert heap.model.observations == 1  # the failed batch, at the heap's limit
    assert after.safe_max_rows_per_partition < cap
    assert oom.before_start("p", OOM).pools[0].model.observations == 1  # one failure, observed once
    assert recorder.metrics.registry.get_sample_value(
        "opsd_memory_failures_total", {"query": "p", "pool": "jvm_heap"}) == 1
    tuner.before_start("p", OOM)
    cut = read_tuning(yt, document)
    # the byte cap guards memory: cut under the bound the failure taught, whatever the rows' width
    assert cut.max_bytes_per_partition <= after.safe_max_bytes_per_partition
    assert cut.max_rows_per_partition < cap


class FinishedQuery:
    def awaitTermination(self, timeout: float) -> bool:
        return True


def test_a_cap_already_in_force_is_what_the_first_batch_is_judged_by_and_a_safe_one_is_kept(yt, started):
    _, _, oom, tuner, document = started
    uncapped = oom.before_start("p")
    safe = uncapped.safe_max_rows_per_partition
    write_tuning(yt, document, max_rows_per_partition=safe // 2)
    verdict = oom.before_start("p")

    assert sorted(verdict.batch.rows_per_partition.values()) == [safe // 2, safe // 2]
    assert verdict.risk <= verdict.target_risk
    tuner.before_start("p")
    assert read_tuning(yt, document).max_rows_per_partition == safe // 2  # not cut: its first batch is safe


def test_a_first_batch_that_died_of_memory_is_observed_and_counted_once(started):
    _, recorder, oom, _, _ = started
    oom.before_start("p")
    after = oom.before_start("p", OOM)  # the run never recorded a batch: the status has no partitions
    heap = next(p for p in after.pools if p.pool == "jvm_heap")
    assert heap.model.observations == 1
    oom.before_start("p", OOM)
    assert recorder.metrics.registry.get_sample_value(
        "opsd_memory_failures_total", {"query": "p", "pool": "jvm_heap"}) == 1
