"""Row latency, queue to table: how long after a producer's insert a row can be read from the `yt` sink's table, beside
Spark's own floor in the same run.

`python -m bench.latency` (from the repository root, in the venv). On the embedded cluster, a producer thread inserts
rows into a 1-tablet queue at `RATE` rows/s (`BURST` rows every `BURST / RATE` s, each row numbered); a query with
the default trigger (each batch starts when the previous one ends) reads the queue through a consumer and writes an
ordered table with the `yt` sink (at-least-once); a poller thread reads the table's new rows every `POLL_SECONDS`.
A row's latency is the poll that first saw it minus the end of the insert call that wrote it (the earliest a reader
of the queue could have read it), for the rows inserted during `MEASURE_SECONDS` after `WARMUP_SECONDS`.

Spark's floor, the same way in the same session: its `rate` source at `RATE` rows/s into `foreachBatch`, each row's
latency the time the batch function runs minus the row's `timestamp` (when the rate source made it: its rows are due
at whole milliseconds, released by batches).

Where a row's latency goes, printed after the latencies: Spark's `durationMs` parts of the `yt` query's batches in the
window (p50, p99), and our own code in one batch of the same size, timed in this process without Spark on the same
kind of cluster (`own_code_per_batch`: the source runner's `latestOffset`, `partitions` and `commit`, a read task, a
sink task, the sink's commit). A row waits for the batch running when it arrives to end, then rides the next one
(plus up to `POLL_SECONDS` until the poller sees it): p50 ~ 1.5 batches, p99 ~ 2 slow batches.

Measured (2 cores shared with other helpers' tests; each line one run): on main, idle, batches of ~160 rows took
0.157 s p50 / 0.198 s p99 (`addBatch` 0.112 / 0.151), latency p50 0.217 s, p99 0.329 s; our own code ~6 ms of it.
Most of `addBatch` was not work: over loopback TCP, Spark's default, the JVM's exchanges with its Python workers stall
~45 ms per batch (a do-nothing Python source into `noop`: `addBatch` 91 ms over TCP, 46 ms over Unix domain sockets).
`build_session` now connects them over Unix domain sockets (`streaming_core.session.worker_socket_conf`). Back to back
on this branch, TCP then Unix sockets: latency p50 0.233 s / p99 0.595 s (batches 0.165 / 0.352 s, `addBatch` 0.118 /
0.236) against p50 0.158 s / p99 0.282 s (batches 0.120 / 0.178 s, `addBatch` 0.072 / 0.113); Spark's floor p99 1.02 s
in both; a later run over Unix sockets on a busier machine (other helpers' work on the 2 cores): p50 0.265 s / p99
0.932 s (batches p99 0.539 s), so the p99 is the machine's load as much as ours. What is left per batch is Spark's:
the job for a Python source and sink (`addBatch` ~70 ms, ~6 ms of it ours), its offset and commit logs (`walCommit` +
`commitOffsets` ~35 ms), planning ~10 ms.

What it cannot show: a real cluster (a remote proxy adds its round trips to the reads, the inserts and the commit),
a reader other than a poller (it adds up to `POLL_SECONDS`), or latency under a backlog (the producer never outruns
the query here). A readable table first; the last line is one JSON object.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from streaming_core import build_session
from streaming_core.cluster import Cluster, connect

RATE = 1_000
BURST = 10
WARMUP_SECONDS = 10.0
MEASURE_SECONDS = 30.0
POLL_SECONDS = 0.01
GOAL_P99_SECONDS = 0.3
#: Batches of our own code timed without Spark (`own_code_per_batch`).
OWN_BATCHES = 100
SCHEMA = [{"name": "n", "type": "int64", "required": True}, {"name": "data", "type": "string", "required": True}]


class Producer(threading.Thread):
    """Inserts numbered rows at `RATE` rows/s and notes when each insert call returned."""

    def __init__(self, cluster: Cluster, queue: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.queue = cluster, queue
        self.inserted: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        n, due = 0, time.monotonic()
        while not self.stop.is_set():
            rows = pa.table({"n": pa.array(range(n, n + BURST), pa.int64()), "data": pa.array(["x" * 100] * BURST)})
            self.cluster.insert_rows(self.queue, rows)
            done = time.time()
            self.inserted.update(dict.fromkeys(range(n, n + BURST), done))
            n += BURST
            due += BURST / RATE
            time.sleep(max(0.0, due - time.monotonic()))


class Poller(threading.Thread):
    """Reads the table's new rows every `POLL_SECONDS` and notes when it first saw each."""

    def __init__(self, cluster: Cluster, table: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.table = cluster, table
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        read = 0
        while not self.stop.is_set():
            total = self.cluster.get_tablet_infos(self.table)[0].total_row_count
            if total > read:
                now = time.time()
                for batch in self.cluster.read_tablet(self.table, 0, read, total):
                    self.seen.update(dict.fromkeys(batch.column("n").to_pylist(), now))
                read = total
            time.sleep(POLL_SECONDS)


def measure_yt(spark: Any, uri: str, work: Path) -> tuple[list[float], list[dict[str, Any]]]:
    with connect(uri) as cluster:
        cluster.create("table", "//bench/queue", recursive=True, attributes={"dynamic": True, "schema": SCHEMA})
        cluster.create("table", "//bench/out", recursive=True, attributes={"dynamic": True, "schema": SCHEMA})
        cluster.create_consumer("//bench/consumer", recursive=True)
        cluster.register_queue_consumer("//bench/queue", "//bench/consumer")
    producer, poller = Producer(connect(uri), "//bench/queue"), Poller(connect(uri), "//bench/out")
    query = (spark.readStream.format("yt").option("consumer_path", "//bench/consumer").load("//bench/queue")
             .writeStream.format("yt").option("path", "//bench/out")
             .option("checkpointLocation", str(work / f"cp-{uuid.uuid4().hex[:8]}")).start())
    producer.start()
    poller.start()
    time.sleep(WARMUP_SECONDS)
    start = time.time()
    time.sleep(MEASURE_SECONDS)
    end = time.time()
    producer.stop.set()
    producer.join()
    time.sleep(3.0)  # the last rows reach the table
    query.stop()
    poller.stop.set()
    poller.join()
    window = [n for n, t in producer.inserted.items() if start <= t < end]
    missing = [n for n in window if n not in poller.seen]
    if missing:
        raise RuntimeError(f"{len(missing)} rows inserted in the window never appeared in the table")
    batches = [p for p in query.recentProgress if p["numInputRows"] and start <= started_at(p) < end]
    return [poller.seen[n] - producer.inserted[n] for n in window], batches


def started_at(progress: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def trigger_parts(batches: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per Spark duration (`durationMs`), its median and p99 in seconds over the window's batches, and the interval
    from one batch's start to the next's."""
    parts = {k: [p["durationMs"].get(k, 0) / 1000 for p in batches] for k in batches[0]["durationMs"]}
    starts = [started_at(p) for p in batches]
    parts["interval"] = [b - a for a, b in itertools.pairwise(starts)]
    parts["rows"] = [p["numInputRows"] for p in batches]
    return {k: {"p50": statistics.median(v), "p99": percentiles(v)["p99"]} for k, v in parts.items() if len(v) > 1}


def own_code_per_batch(uri: str, rows: int) -> dict[str, float]:
    """Median seconds of each step of our own code in one batch of `rows` rows, run in this process without Spark on
    the same cluster as Spark's processes would (the source runner's planning and acknowledging, a read task, a sink
    task, the sink's commit), over `OWN_BATCHES` batches after a few warm-up ones."""
    import pickle

    from streaming_core.datasource import YtDataSource

    with connect(uri) as cluster:
        for table in ("queue", "out"):
            cluster.create("table", f"//own/{table}", recursive=True, attributes={"dynamic": True, "schema": SCHEMA})
        cluster.create_consumer("//own/consumer", recursive=True)
        cluster.register_queue_consumer("//own/queue", "//own/consumer")
        source = YtDataSource({"path": "//own/queue", "consumer_path": "//own/consumer", "cluster": uri})
        schema = source.schema()
        reader = source.streamReader(schema)
        sink = YtDataSource({"path": "//own/out", "cluster": uri, "checkpointLocation": f"{uri}-own-checkpoint"})
        steps: dict[str, list[float]] = {}

        def timed(step: str, call: Any, *args: Any) -> Any:
            started = time.perf_counter()
            result = call(*args)
            steps.setdefault(step, []).append(time.perf_counter() - started)
            return result

        def read(worker: Any, ranges: list[Any]) -> list[pa.RecordBatch]:
            return [batch for r in ranges for batch in worker.read(r)]

        start, previous, n = reader.initialOffset(), None, 0
        for _ in range(OWN_BATCHES + 10):
            cluster.insert_rows("//own/queue", pa.table({"n": pa.array(range(n, n + rows), pa.int64()),
                                                         "data": pa.array(["x" * 100] * rows)}))
            n += rows
            end = timed("latestOffset", reader.latestOffset, start, reader.getDefaultReadLimit())
            if previous is not None:
                timed("acknowledge", reader.commit, previous)
            ranges = timed("partitions", reader.partitions, start, end)
            batches = timed("read task", read, pickle.loads(pickle.dumps(reader)), ranges)
            part = timed("sink task", sink.streamWriter(schema, False).write, iter(batches))
            timed("sink commit", sink.streamWriter(schema, False).commit, [part], n)
            previous = start = end
    return {step: statistics.median(seconds[-OWN_BATCHES:]) for step, seconds in steps.items()}


def measure_floor(spark: Any, work: Path) -> list[float]:
    latencies: list[float] = []
    window: list[float] = []

    def batch(df: Any, batch_id: int) -> None:
        now = time.time()
        if window and window[0] <= now < window[1]:
            latencies.extend(now - row["timestamp"].timestamp() for row in df.select("timestamp").collect())

    query = (spark.readStream.format("rate").option("rowsPerSecond", RATE).load().writeStream.foreachBatch(batch)
             .option("checkpointLocation", str(work / f"cp-{uuid.uuid4().hex[:8]}")).start())
    time.sleep(WARMUP_SECONDS)
    window.extend([time.time(), time.time() + MEASURE_SECONDS])
    time.sleep(MEASURE_SECONDS + 1.0)
    query.stop()
    return latencies


def percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    cut = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50": cut[49], "p99": cut[98], "max": ordered[-1], "rows": len(ordered)}


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    uri = f"local://{work / 'cluster'}"
    spark = build_session("bench-latency", master="local[2]", cluster=uri, conf={
        "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.numRecentProgressUpdates": "10000"})
    try:
        latencies, batches = measure_yt(spark, uri, work)
        found = {"yt": percentiles(latencies), "spark-floor": percentiles(measure_floor(spark, work))}
    finally:
        spark.stop()
    print(f"rows inserted at {RATE}/s, default trigger; latency (s) of the rows of {MEASURE_SECONDS:.0f} s after a "
          f"{WARMUP_SECONDS:.0f} s warm-up:\n{'path':<14}{'rows':>8}{'p50':>8}{'p99':>8}{'max':>8}")
    for name, p in found.items():
        print(f"{name:<14}{p['rows']:>8}{p['p50']:>8.3f}{p['p99']:>8.3f}{p['max']:>8.3f}")
    parts = trigger_parts(batches)
    print(f"the yt query's {len(batches)} batches in the window, Spark's durations (s; rows: rows per batch):\n"
          f"{'part':<20}{'p50':>8}{'p99':>8}")
    for name, p in parts.items():
        print(f"{name:<20}{p['p50']:>8.3f}{p['p99']:>8.3f}")
    own = own_code_per_batch(f"local://{work / 'own'}", round(parts["rows"]["p50"]))
    print(f"our own code in a batch of {round(parts['rows']['p50'])} rows, without Spark (ms, median): "
          + ", ".join(f"{step} {seconds * 1e3:.2f}" for step, seconds in own.items())
          + f"; {sum(own.values()) * 1e3:.1f} in all, of Spark's batch of {parts['triggerExecution']['p50'] * 1e3:.0f}")
    yt, floor = found["yt"], found["spark-floor"]
    print(json.dumps({"bench": "latency", "p50_seconds": round(yt["p50"], 3), "p99_seconds": round(yt["p99"], 3),
                      "max_seconds": round(yt["max"], 3), "goal_p99_seconds": GOAL_P99_SECONDS,
                      "floor_p50_seconds": round(floor["p50"], 3), "floor_p99_seconds": round(floor["p99"], 3),
                      "rows": yt["rows"], "floor_rows": floor["rows"], "rate_rows_per_s": RATE,
                      "poll_seconds": POLL_SECONDS, "batches": len(batches),
                      "trigger_seconds": {k: {q: round(v, 3) for q, v in p.items()} for k, p in parts.items()},
                      "own_code_seconds": {step: round(seconds, 4) for step, seconds in own.items()}}))


if __name__ == "__main__":
    main()
