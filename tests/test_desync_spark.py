"""Desync of real Spark queries stopped at known points, and `opsd desync` healing them on the embedded cluster."""

from __future__ import annotations

import json
import threading

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.desync.check import DesyncCheck
from opsd.checks.desync.evaluate import DesyncState, evaluate
from opsd.cli.main import main
from opsd.collect.positions import PositionsCollector, QueryTarget, collect_target
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.desync import HealOutcome
from opsd.runtime.monitor import recent_progress
from opsd.telemetry.metrics import Metrics
from tests.support.cluster import make_queue
from tests.support.source import checkpoint_of, numbered, read_queue, run_to_end

pytestmark = pytest.mark.spark


def desync_cli(capsys, cluster_uri: str, *args: str) -> tuple[int, str]:
    code = main(["desync", *args, "--cluster", cluster_uri])
    return code, capsys.readouterr().out


def test_a_consumer_left_one_batch_behind_by_available_now_is_healed_to_the_end(
        spark, yt, yt_root, cluster_uri, capsys) -> None:
    queue, consumer, checkpoint = f"{yt_root}/queue", f"{yt_root}/consumer", checkpoint_of(yt_root)
    make_queue(yt, queue, consumer=consumer)
    yt.insert_rows(queue, numbered(100))
    df = read_queue(spark, queue, consumer, max_rows_per_partition=20)

    run = run_to_end(df, checkpoint)

    assert [b.batch_id for b in run.batches] == [0, 1, 2]
    code, out = desync_cli(capsys, cluster_uri, "show", "--checkpoint", checkpoint, "--json")
    partitions = json.loads(out)[queue]["partitions"]
    assert code == 0 and {p["state"] for p in partitions.values()} == {"lagging_one_batch"}
    assert [(p["checkpoint_next"], p["consumer_offset"]) for p in partitions.values()] == [(50, 40), (50, 40)]

    code, out = desync_cli(capsys, cluster_uri, "heal", "--checkpoint", checkpoint, "--queue", queue,
                           "--consumer", consumer, "--dry-run")
    assert (code, yt.get_consumer_offsets(consumer, queue)) == (0, {0: 40, 1: 40})
    assert "would move partition 0 40 -> 50, partition 1 40 -> 50 (end of committed batch 2)" in out

    code, out = desync_cli(capsys, cluster_uri, "heal", "--checkpoint", checkpoint, "--queue", queue,
                           "--consumer", consumer)
    assert (code, yt.get_consumer_offsets(consumer, queue)) == (0, {0: 50, 1: 50})

    # The healed consumer agrees with the checkpoint: the next run reads exactly the new rows.
    yt.insert_rows(queue, numbered(10, start=100))
    again = run_to_end(read_queue(spark, queue, consumer, max_rows_per_partition=20), checkpoint)
    assert sorted(r.n for r in again.rows) == list(range(100, 110))


def test_while_a_batch_runs_a_heal_is_refused_and_a_stuck_consumer_is_healed_after_the_stop(
        spark, yt, yt_root, cluster_uri, capsys) -> None:
    queue, consumer, checkpoint = f"{yt_root}/queue", f"{yt_root}/consumer", checkpoint_of(yt_root)
    make_queue(yt, queue, consumer=consumer)
    yt.insert_rows(queue, numbered(40))
    inside, release = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def batch(df, batch_id: int) -> None:
        if batch_id == 1:
            inside.set()
            release.wait(60)
        df.count()

    target = QueryTarget("q", checkpoint)
    query = (read_queue(spark, queue, consumer, max_rows_per_partition=10).writeStream.foreachBatch(batch)
             .option("checkpointLocation", checkpoint).trigger(processingTime="0 seconds").start())
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    try:
        assert inside.wait(120), "batch 1 never started"
        [facts] = collect_target(yt, target)
        seen["planned"] = (facts.committed_batch, facts.planned_batch, evaluate(facts).state)
        for p in (0, 1):  # someone moves the consumer back while batch 1 runs
            yt.advance_consumer(consumer, queue, p, None, 0)
        seen["heal"] = desync_cli(capsys, cluster_uri, "heal", "--checkpoint", checkpoint, "--queue", queue,
                                  "--consumer", consumer)
        release.set()
        query.processAllAvailable()
        # as attached: from its progress
        DesyncCheck(recorder, PositionsCollector(cluster_uri, progress=recent_progress(spark))).run()
    finally:
        release.set()
        query.stop()

    assert seen["planned"] == (0, 1, DesyncState.IN_SYNC)  # batch 0 acknowledged when batch 1 was planned
    code, out = seen["heal"]
    assert code == 1 and HealOutcome.BATCH_RUNNING.words in out
    assert yt.get_consumer_offsets(consumer, queue) == {0: 0, 1: 0}
    [facts] = collect_target(yt, target)
    assert evaluate(facts).state == DesyncState.STUCK and (facts.committed_batch, facts.planned_batch) == (1, None)
    assert recorder.status.get(str(query.id)).desync[queue].desync.state == DesyncState.STUCK

    code, out = desync_cli(capsys, cluster_uri, "heal", "--checkpoint", checkpoint, "--queue", queue,
                           "--consumer", consumer)
    assert (code, yt.get_consumer_offsets(consumer, queue)) == (0, {0: 20, 1: 20})
