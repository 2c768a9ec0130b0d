"""What opsd costs the job it watches, and how fast it serves a big scrape.

1. Throughput: the same pipeline (yt queue -> noop, 4 partitions, 100-byte rows, many small batches so
   that every listener event counts) with and without `opsd.attach`, alternated in one run. Goal: ratio
   (with / without) >= 0.97.
2. `/metrics`: time to serve a scrape holding 50 queries x 64 partitions of series. Goal: < 50 ms.

Run: `python -m bench.opsd_overhead` (last line: one JSON object).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import urllib.request
from functools import partial

import pyarrow as pa
from prometheus_client import CollectorRegistry, generate_latest

import opsd
from opsd.observe.events import QueryProgressed
from opsd.observe.progress import parse_progress
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.logs import configure_logging
from opsd.telemetry.metrics import Metrics
from streaming_core import build_session
from streaming_core.cluster import Cluster, connect

QUEUE, CONSUMER = "//bench/queue", "//bench/consumer"
PARTITIONS = 4
ROWS = 400_000
MAX_ROWS_PER_PARTITION = 10_000  # 10 batches per run
ROUNDS = 6
RATIO_GOAL = 0.97
SCRAPE_GOAL_MS = 50.0
QUERIES, QUERY_PARTITIONS, SCRAPES = 50, 64, 20


def fill_queue(cluster: Cluster) -> None:
    cluster.create("table", QUEUE, recursive=True, attributes={
        "dynamic": True, "tablet_count": PARTITIONS, "schema": [{"name": "data", "type": "string"}]})
    cluster.create_consumer(CONSUMER)
    cluster.register_queue_consumer(QUEUE, CONSUMER)
    cluster.insert_rows(QUEUE, pa.table({"data": pa.array(["x" * 100] * ROWS)}))


def rewind(cluster: Cluster) -> None:
    """Move the consumer back to the start so that every round reads the same rows."""
    for partition, offset in cluster.get_consumer_offsets(CONSUMER, QUEUE).items():
        cluster.advance_consumer(CONSUMER, QUEUE, partition, offset, 0)


def run_query(spark, cluster: Cluster, checkpoint: str) -> float:
    """Rows/s of one availableNow run of the pipeline from the start of the queue."""
    rewind(cluster)
    started = time.perf_counter()
    query = (spark.readStream.format("yt").option("consumer_path", CONSUMER)
             .option("max_rows_per_partition", MAX_ROWS_PER_PARTITION).load(QUEUE)
             .writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return ROWS / (time.perf_counter() - started)


def run_watched(spark, cluster: Cluster, checkpoint: str) -> float:
    """`run_query` with opsd attached (and detached after its listener has drained)."""
    monitor = opsd.attach(spark, registry=CollectorRegistry(), port=0)
    try:
        return run_query(spark, cluster, checkpoint)
    finally:
        monitor.listener.flush(10)
        monitor.detach()


def throughput(root: str) -> dict[str, float]:
    cluster = connect(f"local://{root}")
    fill_queue(cluster)
    spark = build_session("bench-opsd-overhead", master="local[2]", cluster=f"local://{root}",
                          conf={"spark.ui.showConsoleProgress": "false"})
    run_query(spark, cluster, f"{root}/chk-warmup")
    without: list[float] = []
    with_opsd: list[float] = []
    sides = [(without, run_query, "plain"), (with_opsd, run_watched, "opsd")]
    for i in range(ROUNDS):  # ABBA order, so that a drift of the machine's speed favours neither side
        for results, run, label in sides if i % 2 == 0 else sides[::-1]:
            results.append(run(spark, cluster, f"{root}/chk-{label}-{i}"))
    spark.stop()
    plain, watched = statistics.median(without), statistics.median(with_opsd)
    return {"without_rows_per_s": plain, "with_rows_per_s": watched, "ratio": watched / plain}


def populated_recorder() -> Recorder:
    """A recorder holding a progress event per query, each reading one queue of many partitions."""
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    partitions = {str(p): 1000 * p for p in range(QUERY_PARTITIONS)}
    for q in range(QUERIES):
        offset = json.dumps({"cluster": "local", "path": f"//q{q}", "partitions": partitions})
        latest = json.dumps({"cluster": "local", "path": f"//q{q}",
                             "partitions": {k: v + 500 for k, v in partitions.items()}})
        progress = {
            "id": f"id-{q}", "runId": f"run-{q}", "name": f"query_{q}", "timestamp": "2026-11-22T00:00:00.000Z",
            "batchId": 7, "numInputRows": 1000, "inputRowsPerSecond": 10.0, "processedRowsPerSecond": 20.0,
            "durationMs": {"triggerExecution": 900, "addBatch": 700, "latestOffset": 50, "queryPlanning": 30,
                           "walCommit": 20, "commitOffsets": 20, "getBatch": 1},
            "stateOperators": [], "eventTime": {},
            "sources": [{"description": "yt", "startOffset": offset, "endOffset": offset,
                         "latestOffset": latest, "numInputRows": 1000}],
            "sink": {"description": "noop", "numOutputRows": -1},
        }
        recorder.record(QueryProgressed(parse_progress(progress)))
    return recorder


def render_ms(metrics: Metrics) -> dict[str, float]:
    """opsd's text-cached rendering next to prometheus_client's generate_latest of the same registry."""
    times: dict[str, list[float]] = {"render": [], "generate_latest": []}
    renderers = {"render": metrics.render, "generate_latest": partial(generate_latest, metrics.registry)}
    for _ in range(3):
        for name, func in renderers.items():
            started = time.perf_counter()
            func()
            times[name].append((time.perf_counter() - started) * 1000)
    return {f"{k}_ms_median": statistics.median(v) for k, v in times.items()}


def scrape_ms() -> dict[str, float]:
    recorder = populated_recorder()
    server = OpsHttpServer(recorder.metrics.render, status=recorder.status.to_json, port=0)
    server.start()
    times, size = [], 0
    try:
        for _ in range(SCRAPES):
            started = time.perf_counter()
            with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
                size = len(response.read())
            times.append((time.perf_counter() - started) * 1000)
    finally:
        server.stop()
    return {"scrape_ms_median": statistics.median(times), "scrape_ms_max": max(times), "scrape_bytes": size,
            "series_partitions": QUERIES * QUERY_PARTITIONS, **render_ms(recorder.metrics)}


def main() -> None:
    configure_logging("WARNING")
    scrape = scrape_ms()
    with tempfile.TemporaryDirectory() as root:
        figures = throughput(root)
    print(f"{'measure':42} {'value':>14} {'goal':>10}")
    print(f"{'yt -> noop without opsd (rows/s)':42} {figures['without_rows_per_s']:>14,.0f}")
    print(f"{'yt -> noop with opsd attached (rows/s)':42} {figures['with_rows_per_s']:>14,.0f}")
    print(f"{'ratio with / without':42} {figures['ratio']:>14.3f} {'>= ' + str(RATIO_GOAL):>10}")
    print(f"{'/metrics, 50 queries x 64 partitions (ms)':42} {scrape['scrape_ms_median']:>14.1f} "
          f"{'< ' + str(SCRAPE_GOAL_MS):>10}")
    print(f"{'  render only: opsd / generate_latest (ms)':42} "
          f"{scrape['render_ms_median']:>7.1f} / {scrape['generate_latest_ms_median']:.1f}")
    print(json.dumps({"bench": "opsd_overhead", **figures, "goal": RATIO_GOAL, **scrape,
                      "scrape_goal_ms": SCRAPE_GOAL_MS}))


if __name__ == "__main__":
    main()
