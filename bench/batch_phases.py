"""Where each batch's time goes, on the embedded cluster and through the YTsaurus stand-in, and what measuring it costs.

`python -m bench.batch_phases` (from the repository root, in the venv). Per backend, a 2-tablet queue of 100-byte rows
is read by one `availableNow` query (`max_rows_per_partition` caps it to `BATCHES` micro-batches), through a small
transformation (an upper-cased payload), into an ordered table on the same backend with the `yt` sink; the source and
the sink share a tuning document, so their tasks record their parts next to it (`streaming_core.phase_timing`). The
stand-in runs in a process of its own. Each batch's phases are put together from Spark's progress and the records
exactly as opsd's phases check does (`opsd.observe.phases`).

Printed per backend: the first batch's duration and its largest phase (it starts the source's runner and the Python
workers), then for the batches after it each phase's share of their summed time, the share of `spark_other` that is
Spark's job scheduling inside `addBatch` (its duration less the tasks' span and the sink's commit), and the coverage:
the share of the batches' duration that timers measured (ours, Spark's own `durationMs`, and `addBatch` beyond the
tasks) rather than left over. The parts add up to the duration by construction; the check that can fail is that what
was measured covers each batch's duration within 5% (`parts_add_up`, per backend, for its worst batch): under it, time
nobody measured; over it, tasks that ran longer than Spark's `addBatch` (clocks or attribution wrong).

The cost of measuring: the records' writes (one per read task and one per sink commit, per batch) timed against the
same backend after the query, plus the task clock's own overhead per Arrow batch (timing a wrapped iterator against a
plain one), per batch against the batches' mean duration (`overhead_share`, goal < 1%).

What it cannot show: a real YTsaurus cluster's latencies (the stand-in shares the 2 cores with Spark, so its reads
cost CPU that a remote proxy would not), executors on other hosts (the tasks' times are scaled to the span they ran in
by one machine's clock), or batches that ran while opsd's check was not looking (the document keeps the last 16).
A readable table first; the last line is one JSON object.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from opsd.observe.phases import BatchPhases, batch_phases, shares_of
from opsd.observe.progress import parse_progress
from streaming_core import build_session
from streaming_core.cluster import Cluster, connect
from streaming_core.phase_timing import TaskClock, read_batch_records, record_read, record_sink
from streaming_core.phases import PHASES, TaskTimes

PAYLOAD_BYTES = 100
TABLETS = 2
BATCHES = 8
#: Rows per tablet on each backend: the stand-in serves a fifth of the embedded cluster's rows in the same time.
ROWS_PER_TABLET = {"embedded": 400_000, "stand-in": 80_000}
SCHEMA = [{"name": "data", "type": "string", "required": True}, {"name": "n", "type": "int64", "required": True}]
COVERAGE_TOLERANCE = 0.05
OVERHEAD_GOAL = 0.01
RECORD_SAMPLES = 30


def fill(cluster: Cluster, rows_per_tablet: int) -> None:
    cluster.create("table", "//bench/queue", recursive=True, attributes={
        "dynamic": True, "tablet_count": TABLETS, "schema": SCHEMA})
    cluster.create("table", "//bench/out", recursive=True, attributes={
        "dynamic": True, "tablet_count": 1, "schema": SCHEMA})
    step = 20_000
    for tablet in range(TABLETS):
        for lo in range(0, rows_per_tablet, step):
            n = pa.array(range(lo, min(lo + step, rows_per_tablet)), pa.int64())
            cluster.insert_rows("//bench/queue", pa.table({"data": pa.array(["x" * PAYLOAD_BYTES] * len(n)), "n": n}),
                                tablet_index=tablet)
    cluster.create_consumer("//bench/consumer", recursive=True)
    cluster.register_queue_consumer("//bench/queue", "//bench/consumer")


def run_query(spark: Any, uri: str, rows_per_tablet: int, work: Path) -> list[dict[str, Any]]:
    """One availableNow query, queue -> upper-cased payload -> table; its progress."""
    tuning = "//bench/tuning"
    df = (spark.readStream.format("yt").option("cluster", uri).option("consumer_path", "//bench/consumer")
          .option("tuning_path", tuning).option("max_rows_per_partition", rows_per_tablet // BATCHES)
          .load("//bench/queue").selectExpr("upper(data) AS data", "n"))
    query = (df.writeStream.format("yt").option("cluster", uri).option("path", "//bench/out")
             .option("tuning_path", tuning).option("checkpointLocation", str(work / f"cp-{uuid.uuid4().hex[:8]}"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception():
        raise query.exception()
    return [p for p in query.recentProgress if p["numInputRows"]]


def measure(spark: Any, name: str, uri: str, work: Path) -> dict[str, Any]:
    with connect(uri) as cluster:
        fill(cluster, ROWS_PER_TABLET[name])
    progress = run_query(spark, uri, ROWS_PER_TABLET[name], work)
    with connect(uri) as cluster:
        records = read_batch_records(cluster, "//bench/tuning")
        record_seconds = record_cost(cluster)
    measured = [m for p in progress if (m := batch_phases(parse_progress(p).summary(), records.get(p["batchId"])))]
    if len(measured) != len(progress):
        raise RuntimeError(f"{name}: {len(progress)} batches, {len(measured)} with records")
    return {"batches": measured, "record_seconds": record_seconds, "rows": sum(p["numInputRows"] for p in progress)}


def record_cost(cluster: Cluster) -> dict[str, float]:
    """Median seconds of one read task's record and of one sink commit's (with its two tasks' times)."""
    times = TaskTimes(0, time.time(), time.time(), read_wait=0.1, decode=0.1)
    reads, sinks = [], []
    for i in range(RECORD_SAMPLES):
        started = time.perf_counter()
        record_read(cluster, "//bench/cost", i % TABLETS, times)
        reads.append(time.perf_counter() - started)
        started = time.perf_counter()
        record_sink(cluster, "//bench/cost", i, [times, times], 0.1)
        sinks.append(time.perf_counter() - started)
    return {"read": statistics.median(reads), "sink": statistics.median(sinks)}


def clock_cost_per_item() -> float:
    """Seconds the task clock adds to each item it wraps (an Arrow batch in a read or a sink task)."""
    items = list(range(200_000))
    started = time.perf_counter()
    for _ in iter(items):
        pass
    plain = time.perf_counter() - started
    started = time.perf_counter()
    for _ in TaskClock().timed(iter(items)):
        pass
    return max(0.0, time.perf_counter() - started - plain) / len(items)


def overhead_share(found: dict[str, Any], per_item: float) -> float:
    """The cost of measuring a batch over the mean duration of the batches after the first: a record per read task
    and one per commit, and the clock around every Arrow batch of the read and the sink tasks (64k-row batches, as the
    reads make)."""
    batches: list[BatchPhases] = found["batches"][1:]
    mean = statistics.mean(b.duration_seconds for b in batches)
    arrow_batches = 2 * max(1, found["rows"] // len(found["batches"]) // 65_536 + TABLETS)
    per_batch = TABLETS * found["record_seconds"]["read"] + found["record_seconds"]["sink"] + arrow_batches * per_item
    return per_batch / mean


def report(results: dict[str, dict[str, Any]], per_item: float) -> dict[str, Any]:
    """The table, and the figures: shares over the batches after each query's first, the first batch apart."""
    shares = {name: shares_of(r["batches"][1:]) for name, r in results.items()}
    print(f"batches after each query's first, share of their time:\n{'phase':<14}"
          + "".join(f"{name:>12}" for name in results))
    for phase in PHASES:
        print(f"{phase:<14}" + "".join(f"{shares[name].shares[phase]:>12.1%}" for name in results))
    summary: dict[str, Any] = {}
    for name, r in results.items():
        steady, first = shares[name], shares_of(r["batches"][:1])
        worst = max((b.coverage for b in r["batches"]), key=lambda c: abs(1 - c))
        scheduling = sum(b.scheduling_seconds for b in r["batches"][1:]) / steady.duration_seconds
        cost = overhead_share(r, per_item)
        print(f"{name}: the first batch {first.duration_seconds:.3f} s, {first.words}; then {steady.batches} batches, "
              f"mean {steady.duration_seconds / steady.batches:.3f} s, {steady.words}, of which Spark scheduling the "
              f"job inside addBatch {scheduling:.1%}; coverage {steady.coverage:.3f} (worst batch {worst:.3f}); "
              f"recording {r['record_seconds']['read'] * 1e3:.2f} ms per read task, "
              f"{r['record_seconds']['sink'] * 1e3:.2f} ms per commit: {cost:.2%} of a batch")
        key = name.replace("-", "_")
        summary |= {f"{key}_shares": {p: round(s, 3) for p, s in steady.shares.items()},
                    f"{key}_scheduling_share": round(scheduling, 3),
                    f"{key}_coverage": round(steady.coverage, 3),
                    f"{key}_worst_batch_coverage": round(worst, 3),
                    f"{key}_parts_add_up": abs(1 - worst) <= COVERAGE_TOLERANCE,
                    f"{key}_overhead_share": round(cost, 4),
                    f"{key}_batch_seconds": round(steady.duration_seconds / steady.batches, 3),
                    f"{key}_first_batch_seconds": round(first.duration_seconds, 3),
                    f"{key}_first_batch_largest": first.largest}
    return {"bench": "batch_phases", **summary, "coverage_tolerance": COVERAGE_TOLERANCE,
            "overhead_goal": OVERHEAD_GOAL, "clock_seconds_per_arrow_batch": round(per_item, 9)}


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-phases-"))
    embedded = f"local://{work / 'embedded'}"
    proxy = subprocess.Popen([sys.executable, "-m", "ytsaurus_standin", str(work / "standin")],
                             stdout=subprocess.PIPE, text=True)
    try:
        uris = {"embedded": embedded, "stand-in": proxy.stdout.readline().strip()}
        spark = build_session("bench-phases", master="local[2]", cluster=embedded, conf={
            "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
        try:
            results = {name: measure(spark, name, uri, work) for name, uri in uris.items()}
        finally:
            spark.stop()
    finally:
        proxy.terminate()
        proxy.wait(30)
    print(json.dumps(report(results, clock_cost_per_item())))


if __name__ == "__main__":
    main()
