"""The scheduled auto-tuner on the real embedded cluster: it reads the batches and values a query really has, writes
the tuning document only in mode apply, exports and logs every decision, and cuts the cap before the supervisor
restarts a query that failed of memory."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.checks.autotune.check import AutotuneCheck, targets_for
from opsd.checks.autotune.collect import collect
from opsd.checks.tuning.check import TuningCheck
from opsd.collect.positions import PositionsCollector
from opsd.config.models import OpsdConfig
from opsd.observe.progress import BatchSummary
from opsd.observe.recorder import Recorder
from opsd.observe.status import QueryStatus, StatusStore
from opsd.results.lag import PartitionLag, QueryLag
from opsd.runtime.runner import Supervisor
from opsd.telemetry.metrics import Metrics
from streaming_core.tuning import read_tuning, write_tuning
from streaming_core.write_stats import WriteStats, read_write_stats, record_write_stats
from tests.support.oom import oom_verdict

OOM = "org.apache.spark.SparkException: Task failed: java.lang.OutOfMemoryError: Java heap space"


def config(cluster_uri: str, root: str, autotune: dict[str, Any] | None = None, **source: str) -> OpsdConfig:
    return OpsdConfig.model_validate({
        "cluster": cluster_uri,
        "pipelines": [{"name": "p", "source": {"format": "yt", "path": f"{root}/q", "options": {
            "consumer_path": f"{root}/c", **source}},
            "sink": {"format": "yt", "path": f"{root}/out"}, "trigger": {"processing_time": "10s"},
            "autotune": autotune or {}, "restart": {"initial_backoff_seconds": 0.01}}],
        "watch": [{"name": "w", "checkpoint_location": f"{root}/cp", "consumer": f"{root}/wc"}],
    })


@pytest.fixture
def recorder() -> Recorder:
    return Recorder(Metrics(CollectorRegistry()), StatusStore())


def run_batches(recorder: Recorder, sizes: list[int], seconds_per_row: float = 1e-4) -> None:
    summaries = tuple(BatchSummary(i, 2 * n, n, 0.5 + seconds_per_row * n, {"addBatch": 0.4})
                      for i, n in enumerate(sizes))
    not_draining = QueryLag("p", (PartitionLag("//q", 0, 5_000_000, None),), input_rows_per_second=10.0,
                            processed_rows_per_second=5.0)
    recorder.status.update("p", trigger_interval_seconds=10.0, recent_batches=summaries, lag=not_draining)


def test_pipelines_opsd_runs_are_applied_and_watched_queries_only_recommended(cluster_uri, yt_root):
    modes = {t.query: t.mode for t in targets_for(config(cluster_uri, yt_root))}
    assert modes == {"p": "apply", "w": "recommend"}
    assert targets_for(config(cluster_uri, yt_root, {"mode": "off"})) == [t for t in targets_for(
        config(cluster_uri, yt_root)) if t.query == "w"]


def test_apply_writes_the_raise_to_the_tuning_document_and_logs_exports_it(cluster_uri, yt_root, yt, recorder):
    check = AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(config(cluster_uri, yt_root,
                                                                    max_rows_per_partition="10000")))
    run_batches(recorder, [10_000] * 3)
    with capture_logs() as logs:
        check.run()
    assert read_tuning(yt, f"{yt_root}/c_tuning").max_rows_per_partition == 12_461
    assert read_tuning(yt, f"{yt_root}/c_tuning").reason == "autotune: fast_batches"
    event = next(e for e in logs if e["event"] == "autotune_decision" and e["knob"] == "max_rows_per_partition")
    assert (event["current"], event["recommended"], event["reason"], event["applied"]) == \
        (10_000, 12_461, "fast_batches", True)
    assert event["duration_seconds"] == pytest.approx(1.5) and event["backlog_rows"] == 5_000_000
    sample = recorder.metrics.registry.get_sample_value
    assert sample("opsd_autotune_decisions_total", {"query": "p", "knob": "max_rows_per_partition",
                                                    "direction": "up", "reason": "fast_batches"}) == 1
    assert sample("opsd_autotune_recommended", {"query": "p", "knob": "max_rows_per_partition"}) == 12_461
    assert sample("opsd_autotune_bound", {"query": "p", "knob": "max_rows_per_partition", "bound": "max"}) \
        == 10_000_000
    assert sample("opsd_tuning_max_rows_per_partition", {"query": "p"}) == 12_461
    assert recorder.status.get("p").autotune["max_rows_per_partition"].decision.recommended == 12_461
    # The next run waits for batches planned after the change.
    assert check.run()[0].reason == "stabilising"


def test_the_oom_checks_safe_byte_cap_is_written_as_the_byte_cap_and_read_back_as_in_force(cluster_uri, yt_root, yt,
                                                                                           recorder):
    cfg = config(cluster_uri, yt_root, max_rows_per_partition="10000")
    check = AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(cfg))
    run_batches(recorder, [10_000] * 3)
    recorder.record_oom("p", oom_verdict(0.4, 40_000, 48 << 20, batch_bytes=2e7), target_risk=0.7)
    check.run()
    tuning = read_tuning(yt, f"{yt_root}/c_tuning")
    assert (tuning.max_bytes_per_partition, tuning.max_rows_per_partition) == (48 << 20, 16_711)
    sample = recorder.metrics.registry.get_sample_value
    assert sample("opsd_autotune_decisions_total", {"query": "p", "knob": "max_bytes_per_partition",
                                                    "direction": "up", "reason": "memory_bound"}) == 1
    assert sample("opsd_oom_safe_max_partition_bytes", {"query": "p"}) == 48 << 20
    TuningCheck(recorder, cfg).run()
    assert sample("opsd_tuning_max_partition_bytes", {"query": "p"}) == 48 << 20
    assert recorder.status.get("p").max_bytes_per_partition == 48 << 20


def test_recommend_mode_writes_nothing(cluster_uri, yt_root, yt, recorder):
    target = config(cluster_uri, yt_root, {"mode": "recommend"}, max_rows_per_partition="10000")
    run_batches(recorder, [10_000] * 3)
    decisions = AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(target)).run()
    assert decisions[0].recommended == 12_461
    assert not yt.exists(f"{yt_root}/c_tuning")
    assert recorder.status.get("p").autotune["max_rows_per_partition"].applied is False


def test_the_sinks_write_statistics_drive_rows_per_call(cluster_uri, yt_root, yt, recorder):
    check = AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(config(cluster_uri, yt_root,
                                                                    max_rows_per_partition="10000")))
    record_write_stats(yt, f"{yt_root}/c_tuning", WriteStats.total(
        [WriteStats().call(50_000, 0.2, 50_000), WriteStats().call(50_000, 0.3, 50_000)], batch_id=4, at=1.0))
    assert read_write_stats(yt, f"{yt_root}/c_tuning").calls == 2
    check.run()
    assert read_tuning(yt, f"{yt_root}/c_tuning").dyn_batch_size == 75_000


def test_a_failed_task_counts_as_an_error_of_its_batch():
    stats = WriteStats.total([WriteStats().call(10, 0.1, 100), None], batch_id=1, at=0.0, errors=1)
    assert (stats.calls, stats.rows, stats.errors) == (1, 10, 1)


class FakeQuery:
    def awaitTermination(self, timeout: float) -> bool:
        return True


def test_the_supervisor_restarts_a_query_that_failed_of_memory_with_the_cut_cap(cluster_uri, yt_root, yt, recorder):
    cfg = config(cluster_uri, yt_root)
    check = AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(cfg))
    run_batches(recorder, [200_000])
    caps_at_start: list[int | None] = []

    def start(spark, pipeline):
        caps_at_start.append(read_tuning(yt, f"{yt_root}/c_tuning").max_rows_per_partition)
        if len(caps_at_start) == 1:
            raise RuntimeError(OOM)
        return FakeQuery()

    supervisor = Supervisor(None, cfg.pipelines[0], recorder, start=start, before_start=[check.before_start])
    supervisor.start()
    assert supervisor.finished.wait(10)
    # First start: uncapped, so a safe first cap; the restart after the OOM: half the largest batch's rows.
    assert caps_at_start == [100_000, 50_000]
    assert read_tuning(yt, f"{yt_root}/c_tuning").reason == "autotune: memory_failure"


def test_a_cap_set_by_hand_above_the_bound_is_still_read_as_in_force(cluster_uri, yt_root, yt, recorder):
    write_tuning(yt, f"{yt_root}/c_tuning", max_rows_per_partition=50_000_000)
    run_batches(recorder, [50_000_000 // 10] * 3)
    d = AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(config(cluster_uri, yt_root))).run()[0]
    assert d.current == 50_000_000 and d.recommended <= 10_000_000


def test_the_tuner_reads_the_oom_checks_one_verdict_and_knows_nothing_without_it(cluster_uri, yt_root, yt):
    [target] = [t for t in targets_for(config(cluster_uri, yt_root)) if t.query == "p"]
    verdict = oom_verdict(0.8, 3000)
    judged = collect(yt, target, QueryStatus("p", oom=verdict))
    assert judged.oom is verdict
    assert (judged.oom_risk, judged.safe_max_rows_per_partition) == (0.8, 3000)
    unknown = collect(yt, target, QueryStatus("p"))
    assert unknown.oom is None and unknown.oom_risk is None and unknown.safe_max_rows_per_partition is None
