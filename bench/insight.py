"""What the desync and lag checks cost: one cycle over a big fleet, and their effect on a running query.

1. Cycle: one run of the desync check and one of the lag check (as the daemon schedules them) over 50 queries x 64
   partitions on the embedded cluster: each query has its queue (6,400 rows, some unread), its consumer (a third
   in sync, a third one batch behind, a third further behind) and a checkpoint in Spark's layout with three
   batches, the newest committed. Median of 5 cycles after one warm-up; again with `$timestamp` queues (the lag
   check then reads the next unread row's timestamp of every partition). Goal: `cycle_seconds` < 1 s.
2. Throughput: the pipeline of `bench.opsd_overhead` (embedded queue of 400k 100-byte rows, 4 partitions,
   `max_rows_per_partition` 10000, `availableNow` to `noop`, consumer rewound before each run) without the checks,
   with both checks over that query every second (the daemon's default is 15 s), and with both over the query and
   the 50-query fleet every 2 s; 6 rounds, the order reversed every other round, after one warm-up; rows/s = rows /
   wall time, median per side. Goal: `ratio` (query checked / unchecked) >= 0.97; `fleet_ratio` is context (on 2
   cores a fleet cycle every 2 s takes CPU from the query).

Run: `python -m bench.insight` (last line: one JSON object).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from prometheus_client import CollectorRegistry

from bench.opsd_overhead import CONSUMER, QUEUE, fill_queue, run_query
from opsd.checks.desync.check import DesyncCheck
from opsd.checks.lag.check import LagCheck
from opsd.checks.positions.collect import QueryTarget
from opsd.checks.scheduler import CheckScheduler
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.logs import configure_logging
from opsd.telemetry.metrics import Metrics
from streaming_core import build_session
from streaming_core.cluster import Cluster, connect

QUERIES, PARTITIONS, ROWS_PER_PARTITION = 50, 64, 100
CYCLES = 5
CYCLE_GOAL_SECONDS = 1.0
ROUNDS = 6
CHECK_INTERVAL_SECONDS, FLEET_CHECK_INTERVAL_SECONDS = 1.0, 2.0
RATIO_GOAL = 0.97
METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1795389897044,"conf":{"spark.sql.shuffle.partitions":"4"}}'


def offsets_file(queue: str, consumer: str, last_read: int) -> str:
    partitions = {str(p): last_read for p in range(PARTITIONS)}
    return f"v1\n{METADATA}\n" + json.dumps({"cluster": "local", "path": queue, "partitions": partitions,
                                             "consumer_path": consumer})


def make_fleet(cluster: Cluster, root: Path, *, timestamps: bool) -> list[QueryTarget]:
    """50 queries: queue, consumer and a checkpoint whose batches end at rows 29, 59 and 89 of each partition."""
    tag = "ts" if timestamps else "plain"
    schema = [{"name": "$timestamp", "type": "uint64"}] if timestamps else []
    targets = []
    for q in range(QUERIES):
        queue, consumer = f"//fleet/{tag}/q{q}", f"//fleet/{tag}/c{q}"
        cluster.create("table", queue, recursive=True, attributes={
            "dynamic": True, "tablet_count": PARTITIONS, "schema": [*schema, {"name": "data", "type": "string"}]})
        cluster.create_consumer(consumer)
        cluster.register_queue_consumer(queue, consumer)
        cluster.insert_rows(queue, pa.table({
            "$tablet_index": pa.array([p for p in range(PARTITIONS) for _ in range(ROWS_PER_PARTITION)], pa.int64()),
            "data": pa.array(["x" * 100] * (PARTITIONS * ROWS_PER_PARTITION))}))
        offset = (90, 60, 30)[q % 3]
        with cluster.transaction() as tx:
            for p in range(PARTITIONS):
                tx.advance_consumer(consumer, queue, p, None, offset)
        location = root / tag / f"cp{q}"
        (location / "offsets").mkdir(parents=True)
        (location / "commits").mkdir()
        for batch, last_read in enumerate((29, 59, 89)):
            (location / "offsets" / str(batch)).write_text(offsets_file(queue, consumer, last_read))
            (location / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        targets.append(QueryTarget(f"query_{tag}_{q}", str(location)))
    return targets


def checks(uri: str, targets: list[QueryTarget]) -> tuple[DesyncCheck, LagCheck]:
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    return DesyncCheck(uri, recorder, targets), LagCheck(uri, recorder, targets)


def cycle_seconds(uri: str, targets: list[QueryTarget]) -> float:
    desync, lag = checks(uri, targets)
    times = []
    for _ in range(CYCLES + 1):
        started = time.perf_counter()
        desync.run()
        lag.run()
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def run_checked(spark, cluster: Cluster, checkpoint: str, fleet: list[QueryTarget] | None) -> float:
    """`opsd_overhead.run_query` (rows/s of one availableNow run); with `fleet` not None the desync and lag checks run
    meanwhile over the query (healing it, as `opsd run` does) and the fleet: every second over the query alone,
    every 2 s with a fleet."""
    if fleet is None:
        return run_query(spark, cluster, checkpoint)
    scheduler = CheckScheduler(Metrics(CollectorRegistry()))
    desync, lag = checks(cluster.uri, [QueryTarget("bench", checkpoint, QUEUE, CONSUMER, heal=True), *fleet])
    interval = FLEET_CHECK_INTERVAL_SECONDS if fleet else CHECK_INTERVAL_SECONDS
    scheduler.add_check("desync", desync.run, interval)
    scheduler.add_check("lag", lag.run, interval)
    scheduler.start()
    try:
        return run_query(spark, cluster, checkpoint)
    finally:
        scheduler.shutdown(wait=True)


def throughput(root: str, cluster: Cluster, fleet: list[QueryTarget]) -> dict[str, float]:
    fill_queue(cluster)
    spark = build_session("bench-insight", master="local[2]", cluster=cluster.uri,
                          conf={"spark.ui.showConsoleProgress": "false"})
    run_query(spark, cluster, f"{root}/chk-warmup")
    results: dict[str, list[float]] = {"plain": [], "checks": [], "fleet": []}
    sides = [("plain", None), ("checks", []), ("fleet", fleet)]
    for i in range(ROUNDS):  # ABC then CBA, so that a drift of the machine's speed favours no side
        for label, checked in sides if i % 2 == 0 else sides[::-1]:
            results[label].append(run_checked(spark, cluster, f"{root}/chk-{label}-{i}", checked))
    spark.stop()
    plain, checked, with_fleet = (statistics.median(results[k]) for k in ("plain", "checks", "fleet"))
    return {"without_rows_per_s": plain, "with_rows_per_s": checked, "ratio": checked / plain,
            "with_fleet_rows_per_s": with_fleet, "fleet_ratio": with_fleet / plain}


def main() -> None:
    configure_logging("WARNING")
    with tempfile.TemporaryDirectory() as root:
        cluster = connect(f"local://{root}/cluster")
        plain = make_fleet(cluster, Path(root), timestamps=False)
        stamped = make_fleet(cluster, Path(root), timestamps=True)
        cycle = cycle_seconds(cluster.uri, plain)
        cycle_ts = cycle_seconds(cluster.uri, stamped)
        figures = throughput(root, cluster, plain)
    print(f"{'measure':48} {'value':>12} {'goal':>8}")
    print(f"{'desync + lag cycle, 50 queries x 64 partitions (s)':48} {cycle:>12.3f} {'< 1':>8}")
    print(f"{'  the same with $timestamp queues (s)':48} {cycle_ts:>12.3f}")
    print(f"{'yt -> noop without the checks (rows/s)':48} {figures['without_rows_per_s']:>12,.0f}")
    print(f"{'yt -> noop with its checks every 1 s (rows/s)':48} {figures['with_rows_per_s']:>12,.0f}")
    print(f"{'ratio with / without':48} {figures['ratio']:>12.3f} {'>= 0.97':>8}")
    print(f"{'  + 50-query fleet checked every 2 s (rows/s)':48} {figures['with_fleet_rows_per_s']:>12,.0f}")
    print(f"{'  fleet ratio with / without':48} {figures['fleet_ratio']:>12.3f}")
    print(json.dumps({"bench": "insight", "cycle_seconds": cycle, "cycle_goal_seconds": CYCLE_GOAL_SECONDS,
                      "cycle_seconds_timestamp": cycle_ts, "queries": QUERIES, "partitions": PARTITIONS,
                      "check_interval_seconds": CHECK_INTERVAL_SECONDS,
                      "fleet_check_interval_seconds": FLEET_CHECK_INTERVAL_SECONDS, **figures, "goal": RATIO_GOAL}))


if __name__ == "__main__":
    main()
