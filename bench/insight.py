"""What the checks that read positions cost: one cycle over a big fleet, the reads it makes, and the effect of the
checks on a running query.

1. Cycle: one run of each check that reads where queries stand — desync, lag, OOM risk and the auto-tuner, built by
   `opsd.checks.registry` as `opsd run` builds them, sharing one positions reading — over 50 queries x 64 partitions
   on the embedded cluster: each query has its queue (6,400 rows, some unread), its consumer (a third in sync, a third
   one batch behind, a third further behind), a checkpoint in Spark's layout with three batches, the newest
   committed, and a status as a running query's (its last batch's offsets, for the OOM check; a stand-in for the Spark
   UI with no stages). Median of 5 cycles after one warm-up (the clock moves one interval between cycles, so every
   cycle reads anew); again with `$timestamp` queues (the lag check then reads the next unread row's timestamp of
   every partition). Goal: `cycle_seconds` < 0.1 s (bar 0.2 s).
2. Reads: the cluster's and the checkpoints' read calls are wrapped and counted per query over the measured cycles:
   checkpoint reads (`checkpoint_files`: one listing of a checkpoint's batches and their files), consumer reads
   (`get_consumer_offsets`) and queue reads (`get_tablet_infos`, `get_schema`). `reads_per_query_cycle` is the most
   any query had per cycle, per kind. Goal: 1 each. Rows sampled (`read_tablet`: bytes per row, `$timestamp`) are
   shown beside them.
3. Throughput: the pipeline of `bench.opsd_overhead` (embedded queue of 400k 100-byte rows, 4 partitions,
   `max_rows_per_partition` 10000, `availableNow` to `noop`, consumer rewound before each run) without the checks,
   with desync and lag over that query every second (the daemon's default is 15 s), and with both over the query and
   the 50-query fleet every 2 s; 6 rounds, the order reversed every other round, after one warm-up; rows/s = rows /
   wall time, median per side. Goal: `ratio` (query checked / unchecked) >= 0.97; `fleet_ratio` is context (on 2
   cores a fleet cycle every 2 s takes CPU from the query).

Run: `python -m bench.insight` (last line: one JSON object).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from prometheus_client import CollectorRegistry

import streaming_core.checkpoint
from bench.opsd_overhead import CONSUMER, QUEUE, fill_queue, run_query
from opsd.checks.cycle import Cycle, Step
from opsd.checks.desync.check import DesyncCheck
from opsd.checks.lag.check import LagCheck
from opsd.checks.registry import STEPS, Checks, SparkMemory, build_checks
from opsd.checks.scheduler import CheckScheduler
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.config.models import OpsdConfig
from opsd.observe.progress import PartitionOffsets
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.logs import configure_logging
from opsd.telemetry.metrics import Metrics
from streaming_core import build_session
from streaming_core.cluster import Cluster, connect

QUERIES, PARTITIONS, ROWS_PER_PARTITION = 50, 64, 100
CYCLES = 5
CYCLE_GOAL_SECONDS, CYCLE_BAR_SECONDS = 0.1, 0.2
READS_GOAL = 1
ROUNDS = 6
CHECK_INTERVAL_SECONDS, FLEET_CHECK_INTERVAL_SECONDS = 1.0, 2.0
RATIO_GOAL = 0.97
#: What each counted read is, by the call that makes it.
READ_KINDS = {"checkpoint_files": "checkpoint", "get_consumer_offsets": "consumer", "get_tablet_infos": "queue",
              "get_schema": "queue", "read_tablet": "rows"}
METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1795389897044,"conf":{"spark.sql.shuffle.partitions":"4"}}'
LAST_READ = (29, 59, 89)


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
        for batch, last_read in enumerate(LAST_READ):
            (location / "offsets" / str(batch)).write_text(offsets_file(queue, consumer, last_read))
            (location / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        targets.append(QueryTarget(f"query_{tag}_{q}", str(location), queue, consumer))
    return targets


def fleet_config(uri: str, targets: list[QueryTarget]) -> OpsdConfig:
    """The fleet as the pipelines of one config: what `opsd run` would check."""
    return OpsdConfig.model_validate({"cluster": uri, "pipelines": [
        {"name": t.query, "source": {"path": t.queue, "options": {"consumer_path": t.consumer}},
         "sink": {"format": "console"}, "checkpoint_location": t.checkpoint} for t in targets]})


class NoStages:
    """The Spark UI's REST API of a session that ran no stage yet."""

    def stages(self) -> list[dict[str, Any]]:
        return []


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def fleet_checks(uri: str, targets: list[QueryTarget], clock: Clock) -> Checks:
    """The checks `opsd run` builds for the fleet, with each query's status as a running query's."""
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore(), clock=clock)
    for t in targets:
        last = LAST_READ[-1]
        recorder.status.update(t.query, active=True, started_at=clock.now, last_batch_id=len(LAST_READ) - 1,
                               partitions=tuple(PartitionOffsets(t.queue, p, LAST_READ[-2], last,
                                                                 ROWS_PER_PARTITION - 1) for p in range(PARTITIONS)))
    config = fleet_config(uri, targets)
    return build_checks(recorder, config.checks, config=config, memory=SparkMemory(NoStages(), {}), clock=clock)


class Reads:
    """Counts the cluster's and the checkpoints' read calls by kind and by the path they read."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.counting = False

    def count(self, call: str, path: str) -> None:
        if self.counting:
            self.counts[(READ_KINDS[call], path)] += 1

    @contextmanager
    def wrapped(self, cluster_type: type) -> Iterator[None]:
        """Wrap the read calls: the cluster's methods on its class, `checkpoint_files` in every module holding it."""
        originals: list[tuple[Any, str, Any]] = []

        def wrap(owner: Any, name: str, path_of: Callable[..., str]) -> None:
            original = getattr(owner, name)

            def counted(*args: Any, **kwargs: Any) -> Any:
                self.count(name, path_of(*args, **kwargs))
                return original(*args, **kwargs)

            originals.append((owner, name, original))
            setattr(owner, name, counted)

        for method in ("get_tablet_infos", "get_schema", "read_tablet"):
            wrap(cluster_type, method, lambda _self, queue, *a, **k: queue)
        wrap(cluster_type, "get_consumer_offsets", lambda _self, consumer, *a, **k: consumer)
        files = streaming_core.checkpoint.checkpoint_files
        for module in [m for m in list(sys.modules.values()) if getattr(m, "checkpoint_files", None) is files]:
            wrap(module, "checkpoint_files", lambda location, *a, **k: str(location))
        try:
            yield
        finally:
            for owner, name, original in reversed(originals):
                setattr(owner, name, original)

    def per_query_cycle(self, targets: list[QueryTarget], cycles: int) -> dict[str, float]:
        """Per kind, the most reads any query had per cycle (`rows`: per query on average)."""
        found: dict[str, float] = {}
        for kind in ("checkpoint", "consumer", "queue"):
            found[kind] = max(self.counts[(kind, path)] for t in targets
                              for path in (t.checkpoint, t.consumer, t.queue) if path) / cycles
        rows = sum(n for (kind, _), n in self.counts.items() if kind == "rows")
        found["rows"] = rows / cycles / len(targets)
        return found


def measure_cycle(uri: str, targets: list[QueryTarget]) -> tuple[float, dict[str, float]]:
    """Median seconds of a cycle of the position checks, and the reads per query and cycle."""
    clock, reads = Clock(), Reads()
    checks = fleet_checks(uri, targets, clock)
    times = []
    with connect(uri) as cluster, reads.wrapped(type(cluster)):
        for i in range(CYCLES + 1):
            reads.counting = i > 0
            clock.now += max(s.interval_seconds for s in checks.cycle.steps) + 1  # every step is due
            started = time.perf_counter()
            checks.cycle.run()
            times.append(time.perf_counter() - started)
    return statistics.median(times[1:]), reads.per_query_cycle(targets, CYCLES)


def run_checked(spark, cluster: Cluster, checkpoint: str, fleet: list[QueryTarget] | None) -> float:
    """`opsd_overhead.run_query` (rows/s of one availableNow run); with `fleet` not None the desync and lag checks run
    meanwhile over the query (healing it, as `opsd run` does) and the fleet: every second over the query alone,
    every 2 s with a fleet."""
    if fleet is None:
        return run_query(spark, cluster, checkpoint)
    scheduler = CheckScheduler(Metrics(CollectorRegistry()))
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    interval = FLEET_CHECK_INTERVAL_SECONDS if fleet else CHECK_INTERVAL_SECONDS
    positions = PositionsCollector(cluster.uri, [QueryTarget("bench", checkpoint, QUEUE, CONSUMER, heal=True), *fleet])
    cycle = Cycle(recorder, positions, [Step(DesyncCheck(recorder, positions), interval),
                                        Step(LagCheck(recorder, positions), interval)])
    scheduler.add_check(cycle.name, cycle.run, interval)
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
        cycle_s, reads = measure_cycle(cluster.uri, plain)
        cycle_ts, reads_ts = measure_cycle(cluster.uri, stamped)
        figures = throughput(root, cluster, plain)
    goal, bar = f"< {CYCLE_GOAL_SECONDS}", f"bar {CYCLE_BAR_SECONDS}"
    print(f"{'measure':58} {'value':>12} {'goal':>8}")
    print(f"{'cycle of the position checks, 50 x 64 partitions (s)':58} {cycle_s:>12.3f} {goal:>8} {bar}")
    print(f"{'  the same with $timestamp queues (s)':58} {cycle_ts:>12.3f}")
    for kind in ("checkpoint", "consumer", "queue"):
        print(f"{f'  {kind} reads per query and cycle (most of any query)':58} {reads[kind]:>12.1f} "
              f"{READS_GOAL:>8}")
    print(f"{'  rows sampled per query and cycle (read_tablet calls)':58} {reads['rows']:>12.1f}")
    print(f"{'    the same with $timestamp queues':58} {reads_ts['rows']:>12.1f}")
    print(f"{'yt -> noop without the checks (rows/s)':58} {figures['without_rows_per_s']:>12,.0f}")
    print(f"{'yt -> noop with its checks every 1 s (rows/s)':58} {figures['with_rows_per_s']:>12,.0f}")
    print(f"{'ratio with / without':58} {figures['ratio']:>12.3f} {'>= 0.97':>8}")
    print(f"{'  + 50-query fleet checked every 2 s (rows/s)':58} {figures['with_fleet_rows_per_s']:>12,.0f}")
    print(f"{'  fleet ratio with / without':58} {figures['fleet_ratio']:>12.3f}")
    print(json.dumps({"bench": "insight", "cycle_seconds": cycle_s, "cycle_goal_seconds": CYCLE_GOAL_SECONDS,
                      "cycle_bar_seconds": CYCLE_BAR_SECONDS, "cycle_seconds_timestamp": cycle_ts,
                      "reads_per_query_cycle": {k: reads[k] for k in ("checkpoint", "consumer", "queue")},
                      "reads_goal": READS_GOAL, "rows_reads_per_query_cycle": reads["rows"],
                      "rows_reads_per_query_cycle_timestamp": reads_ts["rows"], "checks": list(STEPS),
                      "queries": QUERIES, "partitions": PARTITIONS, "check_interval_seconds": CHECK_INTERVAL_SECONDS,
                      "fleet_check_interval_seconds": FLEET_CHECK_INTERVAL_SECONDS, **figures, "goal": RATIO_GOAL}))


if __name__ == "__main__":
    main()
