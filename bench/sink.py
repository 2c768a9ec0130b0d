"""`yt` sink throughput against Spark's `noop` sink: same queue, same data, one Spark session, one run.

`python -m bench.sink` (from the repository root, in the venv). A queue of two tablets holds rows of one
100-byte string and an int64 on the embedded cluster (a fresh temporary root). Every measurement is one
`availableNow` query over all of it through a fresh consumer and checkpoint; rows/s = rows / wall time from
`start()` to termination, so both sides carry the same per-query overhead. Each ratio compares a `yt` run with
a `noop` run made just before it (same source options), so that both see the same machine load:

- `yt` at-least-once: median ratio of three such pairs - the goal (>= 0.7);
- `yt` transactional, the idempotent receiver (source service columns, sorted table keyed by them, against `noop`
  with service columns) and producer mode (`producer_path`: pushes through a queue producer, exactly-once into
  the queue): one pair each, right after each at-least-once pair (three rounds);
- the price of the stronger guarantees, side by side: transactional / at-least-once, idempotent / at-least-once
  and producer / at-least-once rows/s over the three rounds (total rows / total time of each mode) - goals (>= 0.8
  for the first two, >= 0.9 for producer mode). The idempotent queries all write one sorted table (a receiver keeps
  its table): from the second round on every row replaces a stored one, and the third round's writes trigger a
  compaction of its runs. The producer queries share one producer table, each with sessions of its own (named by
  its checkpoint);
- at-least-once over a sweep of `dyn_batch_size` values (rows/s; ratio to the median `noop`);
- the floor, from a source that is not the `yt` one: Spark's `rate-micro-batch` (a JVM source, the same rows: a
  100-byte payload and an int64, two partitions, one micro-batch) into `noop`, into `python-floor` (a Python data
  source sink that discards what it gets) and into the `yt` at-least-once sink, three rounds. `floor_ratio` =
  `python-floor` / `noop`: what PySpark's Python sink path itself costs (rows to Arrow, a Python worker per task,
  the commit round), the best any Python sink can reach; `yt_vs_floor` = `yt` / `python-floor` on that source: how
  close the `yt` sink comes to it. Neither shares the Python source with `ratio`, whose both sides read through
  the `yt` source (whose cost dilutes the sink's there).

What it cannot show: a real cluster's insert and push latencies (the embedded cluster is local SQLite; a
YTsaurus proxy's round trips per `dyn_batch_size` call are not here, so the producer's ratio to at-least-once holds
for the local cost of a push, not a remote one), transactions over 100,000 rows per tablet (the embedded cluster
takes any size), and executors on other hosts beyond `local-cluster`.

Then the cost of distance (`bench.distance`): at-least-once pairs again on `local-cluster[2,1,1024]` in a child
process over the same queue, and `distance_ratio`, its `yt` rows/s over `local[2]`'s.

A readable table first; the last line is one JSON object for scripts and CI logs.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

from bench.distance import FLAG, LOCAL_CLUSTER, on_local_cluster
from streaming_core import build_session
from streaming_core.cluster import Cluster, connect
from streaming_core.options import SRC_ROW_INDEX, SRC_TABLET_INDEX

PAYLOAD_BYTES = 100
ROWS = 400_000  # in all, over two tablets: a few seconds per query, under ~3 minutes for the whole run
WARM_UPS = 3  # noop / yt pairs before measuring: the JIT keeps speeding both up for a few runs
REPEATS = 3  # back-to-back noop / yt pairs for the at-least-once ratio (their median)
TABLETS = 2
GOAL = 0.7
GUARANTEE_GOAL = 0.8  # transactional and idempotent rows/s against at-least-once rows/s of the same round
PRODUCER_GOAL = 0.9  # producer mode's rows/s against at-least-once rows/s of the same round
SWEEP = (1_000, 10_000, 50_000, 100_000)
QUEUE = "//bench/queue"
PRODUCER = "//bench/producer"
FLOOR_SOURCE = "rate-micro-batch"
COPY_SCHEMA = [{"name": "data", "type": "string", "required": True}, {"name": "n", "type": "int64"}]
IDEMPOTENT_SCHEMA = [
    {"name": SRC_TABLET_INDEX, "type": "int64", "required": True, "sort_order": "ascending"},
    {"name": SRC_ROW_INDEX, "type": "int64", "required": True, "sort_order": "ascending"},
    *COPY_SCHEMA,
]


#: Per mode: the source options of both runs of a pair, and the `yt` sink's own options.
MODES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "at-least-once": ({}, {}),
    "transactional": ({}, {"transactional": True}),
    "idempotent receiver": ({"service_columns": True}, {}),
    "producer": ({}, {"producer_path": PRODUCER, "create_producer": True}),
}
#: The modes priced against at-least-once, and their goals.
VERSUS = {"transactional": GUARANTEE_GOAL, "idempotent receiver": GUARANTEE_GOAL, "producer": PRODUCER_GOAL}


def fill_queue(cluster: Cluster) -> None:
    cluster.create("table", QUEUE, recursive=True, attributes={
        "dynamic": True, "tablet_count": TABLETS, "schema": COPY_SCHEMA})
    per_tablet = ROWS // TABLETS
    for tablet in range(TABLETS):
        for lo in range(0, per_tablet, 50_000):
            n = pa.array(range(lo, min(lo + 50_000, per_tablet)), pa.int64())
            data = pa.array([f"{tablet}-{i:012d}".ljust(PAYLOAD_BYTES, "x") for i in n.to_pylist()], pa.string())
            cluster.insert_rows(QUEUE, pa.table({"data": data, "n": n}), tablet_index=tablet)


class FloorWriter(DataSourceStreamArrowWriter):
    def write(self, iterator) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages, batchId) -> None:
        """Nothing to make visible."""

    def abort(self, messages, batchId) -> None:
        """Nothing to take back."""


class FloorSink(DataSource):
    """`python-floor`: the cost of PySpark's Python sink path itself, with nothing written."""

    @classmethod
    def name(cls) -> str:
        return "python-floor"

    def streamWriter(self, schema, overwrite) -> FloorWriter:
        return FloorWriter()


class Bench:
    def __init__(self, spark, cluster: Cluster) -> None:
        self.spark = spark
        self.cluster = cluster
        self.sorted_target: str | None = None

    def _consumer(self) -> str:
        path = f"//bench/consumers/{uuid.uuid4().hex[:8]}"
        self.cluster.create_consumer(path, recursive=True)
        self.cluster.register_queue_consumer(QUEUE, path)
        return path

    def _target(self, schema: list[dict[str, Any]]) -> str:
        """A fresh ordered table per query; one sorted table for every idempotent query, as a receiver that
        takes replays keeps its table: later queries upsert the same keys, and the compactions they cause
        are measured with them."""
        sorted_table = any(c.get("sort_order") for c in schema)
        if sorted_table and self.sorted_target:
            return self.sorted_target
        path = f"//bench/out/{uuid.uuid4().hex[:8]}"
        attributes: dict[str, Any] = {"dynamic": True, "schema": schema}
        if not sorted_table:
            attributes["tablet_count"] = TABLETS
        self.cluster.create("table", path, recursive=True, attributes=attributes)
        if sorted_table:
            self.sorted_target = path
        return path

    def run(self, sink: str, *, service_columns: bool = False, source: str = "yt", **options: Any) -> float:
        """Rows/s of one availableNow query over the whole queue (`source` "yt"), or as many rows from
        `FLOOR_SOURCE`, into `sink` ("noop", "yt" or the floor)."""
        if source == FLOOR_SOURCE:
            df = (self.spark.readStream.format(FLOOR_SOURCE).option("rowsPerBatch", ROWS)
                  .option("numPartitions", TABLETS).load()
                  .selectExpr(f"repeat('x', {PAYLOAD_BYTES}) AS data", "value AS n"))
        else:
            df = (self.spark.readStream.format("yt").option("consumer_path", self._consumer())
                  .option("include_service_columns", service_columns).load(QUEUE))
        writer = (df.writeStream.format(sink).trigger(availableNow=True)
                  .option("checkpointLocation", f"yt:///bench/checkpoints/{uuid.uuid4().hex[:8]}"))
        if sink == "yt":
            writer = writer.option("path", self._target(IDEMPOTENT_SCHEMA if service_columns else COPY_SCHEMA))
        for key, value in options.items():
            writer = writer.option(key, value)
        started = time.perf_counter()
        query = writer.start()
        query.awaitTermination()
        elapsed = time.perf_counter() - started
        if query.exception():
            raise RuntimeError(f"bench query failed: {query.exception()}")
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        if rows != ROWS:
            raise RuntimeError(f"bench query read {rows} rows, expected {ROWS}")
        return rows / elapsed


def pair(bench: Bench, base: dict[str, Any], yt: dict[str, Any]) -> tuple[float, float]:
    """A baseline run and a `yt` run back to back, so both see the same machine load."""
    return bench.run("noop", **base), bench.run("yt", **base, **yt)


def session(root: str, master: str):
    return build_session("bench-sink", master=master, cluster=f"local://{root}",
                         conf={"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"})


def write_on_local_cluster(root: str) -> None:
    """The child of `main()`: at-least-once pairs on `local-cluster` over the filled queue (a warm-up pair, then
    `REPEATS`); prints the median rows/s of each side."""
    with connect(f"local://{root}") as cluster:
        spark = session(root, LOCAL_CLUSTER)
        bench = Bench(spark, cluster)
        try:
            pair(bench, {}, {})
            pairs = [pair(bench, {}, {}) for _ in range(REPEATS)]
        finally:
            spark.stop()
    print(json.dumps({"noop_rows_per_s": round(statistics.median(n for n, _ in pairs)),
                      "yt_rows_per_s": round(statistics.median(y for _, y in pairs))}))


def main() -> None:
    if sys.argv[1:2] == [FLAG]:
        write_on_local_cluster(sys.argv[2])
        return
    root = tempfile.mkdtemp(prefix="bench-sink-")
    with connect(f"local://{root}") as cluster:
        fill_queue(cluster)
        spark = session(root, "local[2]")
        spark.dataSource.register(FloorSink)
        bench = Bench(spark, cluster)
        for _ in range(WARM_UPS):  # JIT, Python workers, first reads of the queue, the sink's imports
            bench.run("noop")
            bench.run("yt")
        pairs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
        for _ in range(REPEATS):  # one round: the three modes back to back, each after its own noop run
            for mode, (base, yt) in MODES.items():
                pairs[mode].append(pair(bench, base, yt))
        floor = [(bench.run("noop", source=FLOOR_SOURCE), bench.run(FloorSink.name(), source=FLOOR_SOURCE),
                  bench.run("yt", source=FLOOR_SOURCE)) for _ in range(REPEATS)]
        sweep = {size: bench.run("yt", dyn_batch_size=size) for size in SWEEP}
        spark.stop()
    distant = on_local_cluster("bench.sink", root)

    ratios = {mode: statistics.median(y / n for n, y in runs) for mode, runs in pairs.items()}
    # rows/s over all rounds (total rows / total time), so that a round with a compaction counts in full
    versus = {mode: sum(1 / a for _, a in pairs["at-least-once"]) / sum(1 / y for _, y in pairs[mode])
              for mode in VERSUS}
    noop = statistics.median(n for n, _ in pairs["at-least-once"])
    print(f"queue -> sink, {ROWS} rows of {PAYLOAD_BYTES} bytes, {TABLETS} tablets, local[2], availableNow")
    print(f"{'sink':<36}{'noop rows/s':>13}{'yt rows/s':>12}{'ratio':>8}")
    for mode, runs in pairs.items():
        for i, (base, rate) in enumerate(runs):
            label = f"yt {mode}" + (f" (run {i + 1})" if len(runs) > 1 else "")
            print(f"{label:<36}{base:>13,.0f}{rate:>12,.0f}{rate / base:>8.2f}")
    for size, rate in sweep.items():
        print(f"{f'yt at-least-once dynBatchSize={size}':<36}{noop:>13,.0f}{rate:>12,.0f}{rate / noop:>8.2f}")
    print(f"from {FLOOR_SOURCE} (not the yt source): noop, python-floor and yt at-least-once sinks")
    print(f"{'run':<36}{'noop rows/s':>13}{'floor rows/s':>13}{'yt rows/s':>12}{'floor/noop':>11}{'yt/floor':>9}")
    for i, (base, rate, yt_rate) in enumerate(floor):
        print(f"{f'run {i + 1}':<36}{base:>13,.0f}{rate:>13,.0f}{yt_rate:>12,.0f}{rate / base:>11.2f}"
              f"{yt_rate / rate:>9.2f}")
    floor_ratio = statistics.median(f / n for n, f, _ in floor)
    yt_vs_floor = statistics.median(y / f for _, f, y in floor)
    ratio = ratios["at-least-once"]
    print(f"at-least-once ratio (median of {REPEATS} back-to-back pairs) {ratio:.2f}, goal >= {GOAL}: "
          f"{'met' if ratio >= GOAL else 'NOT met'}; from {FLOOR_SOURCE}, the Python sink floor reaches "
          f"{floor_ratio:.2f} of noop and the yt sink {yt_vs_floor:.2f} of the floor")
    for mode, value in versus.items():
        print(f"{mode} / at-least-once rows/s (over {REPEATS} rounds) {value:.2f}, goal >= {VERSUS[mode]}: "
              f"{'met' if value >= VERSUS[mode] else 'NOT met'}")
    near = statistics.median(y for _, y in pairs["at-least-once"])
    distance_ratio = distant["yt_rows_per_s"] / near
    print(f"yt at-least-once on {LOCAL_CLUSTER}: {distant['yt_rows_per_s']:,.0f} rows/s, {distance_ratio:.2f} of "
          f"local[2]'s {near:,.0f} (noop there: {distant['noop_rows_per_s']:,.0f} rows/s)")
    print(json.dumps({
        "bench": "sink", "ratio": round(ratio, 3), "goal": GOAL, "rows": ROWS,
        "noop_rows_per_s": round(noop),
        "yt_rows_per_s": round(statistics.median(y for _, y in pairs["at-least-once"])),
        "transactional_ratio": round(ratios["transactional"], 3),
        "idempotent_ratio": round(ratios["idempotent receiver"], 3),
        "transactional_vs_at_least_once": round(versus["transactional"], 3),
        "idempotent_vs_at_least_once": round(versus["idempotent receiver"], 3),
        "guarantee_goal": GUARANTEE_GOAL,
        "producer_vs_at_least_once": round(versus["producer"], 3), "producer_goal": PRODUCER_GOAL,
        "producer_ratio": round(ratios["producer"], 3),
        "producer_rows_per_s": round(statistics.median(y for _, y in pairs["producer"])),
        "transactional_rows_per_s": round(statistics.median(y for _, y in pairs["transactional"])),
        "idempotent_rows_per_s": round(statistics.median(y for _, y in pairs["idempotent receiver"])),
        "dyn_batch_size_rows_per_s": {str(k): round(v) for k, v in sweep.items()},
        "floor_source": FLOOR_SOURCE, "floor_ratio": round(floor_ratio, 3), "yt_vs_floor": round(yt_vs_floor, 3),
        "floor_rows_per_s": round(statistics.median(f for _, f, _ in floor)),
        "distance_ratio": round(distance_ratio, 3), "local_cluster": LOCAL_CLUSTER,
        "local_cluster_yt_rows_per_s": distant["yt_rows_per_s"],
        "local_cluster_noop_rows_per_s": distant["noop_rows_per_s"],
    }))


if __name__ == "__main__":
    main()
