"""After a memory failure the tuner cuts the cap, and a restart would still replay the failed batch with the range it
was planned with (Spark's offset log): so, before the runner restarts the query, the tuner plans that batch again
under the cut cap, when the facts show no output can be lost or doubled by it, and says why not when they do not."""

from __future__ import annotations

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.checks.autotune.check import AutotuneCheck, targets_for
from opsd.checks.autotune.collect import ReplanPolicy, replan_policy, uncommitted
from opsd.collect.positions import PositionsCollector
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.autotune import ReplanRefusal
from opsd.runtime.runner import Supervisor
from opsd.telemetry.metrics import Metrics
from streaming_core.checkpoint import drop_planned_batch, newest_batch
from streaming_core.sink import COMMIT_LOG_SCHEMA
from streaming_core.tuning import read_tuning, write_tuning
from tests.support.cluster import QUEUE_SCHEMA, make_queue
from tests.support.pipelines import MEMORY_BOUND_ROWS

ROWS = 3000  # per partition
CAP = 2000  # per partition: over the transform's memory bound


def config(cluster_uri: str, root: str, checkpoint: str, mode: str = "apply", **sink: object) -> OpsdConfig:
    return OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [{
        "name": "replan", "source": {"path": f"{root}/q", "options": {"consumer_path": f"{root}/c"}},
        "transform": {"callable": "tests.support.pipelines:memory_bound"},
        "sink": {"format": "yt", "path": f"{root}/out", **sink}, "trigger": {"available_now": True},
        "checkpoint_location": checkpoint, "autotune": {"mode": mode, "min_rows_per_partition": 100},
        "restart": {"initial_backoff_seconds": 0.1, "max_restarts": 3}}]})


@pytest.mark.spark
def test_the_batch_that_died_of_memory_is_planned_again_under_the_cut_cap(spark, yt, yt_root, cluster_uri,
                                                                          tmp_path):
    make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
    yt.create("table", f"{yt_root}/out", attributes={"dynamic": True, "schema": QUEUE_SCHEMA})
    for tablet in (0, 1):
        yt.insert_rows(f"{yt_root}/q", pa.table({"data": [f"t{tablet}"] * ROWS, "n": list(range(ROWS))}),
                       tablet_index=tablet)
    cfg = config(cluster_uri, yt_root, str(tmp_path / "checkpoint"))
    write_tuning(yt, cfg.pipelines[0].source_tuning_path(), max_rows_per_partition=CAP)
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    tuner = AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(cfg))
    supervisor = Supervisor(spark, cfg.pipelines[0], recorder, before_start=[tuner.before_start])

    with capture_logs() as logs:
        supervisor.start()
        assert supervisor.finished.wait(300)

    events = [e["event"] for e in logs]
    assert events.count("pipeline_failed") == 1, "one failure: the restart did not replay the failed range"
    assert not supervisor.gave_up and supervisor.permanent_failure is None
    assert "autotune_replanned" in events and "autotune_checkpoint_unreadable" not in events
    assert recorder.metrics.registry.get_sample_value("opsd_autotune_decisions_total", {
        "query": "replan", "knob": "planned_batch", "direction": "down", "reason": "memory_failure"}) == 1
    cap = read_tuning(yt, cfg.pipelines[0].source_tuning_path()).max_rows_per_partition
    assert cap <= MEMORY_BOUND_ROWS < CAP
    written = [row for batch in yt.read_tablet(f"{yt_root}/out", 0, 0, 2 * ROWS) for row in batch.to_pylist()]
    assert sorted((r["data"], r["n"]) for r in written) == sorted(
        (f"t{t}", n) for t in (0, 1) for n in range(ROWS)), "every row once: none lost, none doubled"
    batch, committed = newest_batch(str(tmp_path / "checkpoint"))
    assert committed and batch + 1 >= ROWS // cap  # the re-planned batch 0 and the ones after it, at the cut cap


def planned_checkpoint(root, batches: int, committed: int) -> str:
    """A checkpoint with `offsets/0..batches-1` (and Hadoop checksums) and `commits/0..committed-1`."""
    for folder, count in (("offsets", batches), ("commits", committed)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            (root / folder / str(i)).write_text("v1\n{}\n-\n")
            (root / folder / f".{i}.crc").write_text("")
    return str(root)


def test_only_the_newest_uncommitted_batch_is_removed_with_its_checksum(tmp_path):
    location = planned_checkpoint(tmp_path, batches=3, committed=2)
    with pytest.raises(ValueError, match="batch 1 is not the newest planned batch"):
        drop_planned_batch(location, 1)
    drop_planned_batch(location, 2)
    assert sorted(p.name for p in (tmp_path / "offsets").iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    assert newest_batch(location) == (1, True)
    with pytest.raises(ValueError, match="batch 1 is committed"):
        drop_planned_batch(location, 1)


def test_why_a_planned_batch_may_not_be_planned_again(yt, yt_root, cluster_uri, tmp_path):
    location = planned_checkpoint(tmp_path / "cp", batches=3, committed=2)

    def facts(location: str = location, **pipeline: object):
        cfg = config(cluster_uri, yt_root, location)
        changed = cfg.pipelines[0].model_copy(update=pipeline)
        return uncommitted(yt, replan_policy(changed, cluster_uri, {}))

    assert facts() is not None and facts().batch_id == 2 and facts().unsafe is None  # at-least-once yt sink
    sink = config(cluster_uri, yt_root, location).pipelines[0].sink
    for_each = sink.model_copy(update={"format": "foreachBatch", "callable": "m:f", "path": None})
    assert facts(sink=for_each).unsafe is ReplanRefusal.FOREACH_BATCH
    assert facts(sink=sink.model_copy(update={"format": "parquet"})).unsafe is ReplanRefusal.FILE_SINK
    assert facts(stateful=True).unsafe is ReplanRefusal.STATEFUL
    assert ReplanRefusal.NO_CHECKPOINT is replan_policy(
        config(cluster_uri, yt_root, location).pipelines[0].model_copy(update={"checkpoint_location": None}),
        cluster_uri, {}).refused
    # A transactional commit that holds the batch refuses it, whether or not opsd's config says transactional.
    yt.create("table", f"{yt_root}/out_commits", recursive=True,
              attributes={"dynamic": True, "schema": COMMIT_LOG_SCHEMA})
    transactional = sink.model_copy(update={"options": {"transactional": "true"}})
    assert facts(sink=transactional).unsafe is None  # its commit log does not hold batch 2
    yt.insert_rows(f"{yt_root}/out_commits", [{"query": location, "batch_id": 2, "rows": 1, "committed_at": 0.0}])
    assert facts(sink=transactional).unsafe is ReplanRefusal.SINK_COMMITTED
    assert facts().unsafe is ReplanRefusal.SINK_COMMITTED
    (tmp_path / "cp" / "state" / "0").mkdir(parents=True)
    assert facts().unsafe is ReplanRefusal.STATEFUL
    assert uncommitted(yt, ReplanPolicy()) is None  # a watched query: no checkpoint opsd may touch
    with capture_logs() as logs:
        assert facts("hdfs://namenode/cp") is None  # unreadable: nothing is planned again
    assert logs[0]["event"] == "autotune_checkpoint_unreadable"
    drop_planned_batch(location, 2)
    assert facts() is None  # nothing planned past the committed batch


def test_recommend_mode_and_scheduled_runs_never_touch_the_checkpoint(yt, yt_root, cluster_uri, tmp_path):
    location = planned_checkpoint(tmp_path, batches=1, committed=0)
    make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
    cfg = config(cluster_uri, yt_root, location)
    oom = "org.apache.spark.SparkException: Task failed: java.lang.OutOfMemoryError: Java heap space"
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update("replan", active=False, exception=oom, run_id="r1")
    # scheduled: the query may be restarting
    AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(cfg)).run()
    assert newest_batch(location) == (0, False)
    recommending = config(cluster_uri, yt_root, location, mode="recommend")
    AutotuneCheck(recorder, PositionsCollector(cluster_uri), targets_for(recommending)).before_start("replan", oom)
    assert newest_batch(location) == (0, False)
