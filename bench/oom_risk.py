"""OOM risk validated on real out-of-memory runs: did opsd predict, before a batch ran, that it would die of memory?

A matrix of workloads x batch sizes, each run for real in its own process with small memory (`local[1]`,
`spark.driver.memory=512m`; Python workers `spark.executor.pyspark.memory=1g`, see below): one micro-batch of
the planned size read from a 2-tablet `yt` queue of 100-byte rows. Per workload the sizes run from small to large,
like the batches of one query that grow: before each run, opsd's model (`opsd.checks.oom.evaluate`, default
settings and prior, nothing tuned here) predicts that batch's peak per pool from the runs before it (the first
from the prior alone); after it, the peaks Spark measured (REST `/stages`, `peakExecutorMetrics`) or the memory
failure are what the model learns. Bytes per row are measured on a queue of the same rows through the collect
step opsd uses (`sample_bytes_per_row`).

Workloads: `passthrough` (to the `yt` sink; chunked, so memory should not grow with the batch), `to_pandas`
(`foreachBatch` with `toPandas()`: the batch collected through the driver's heap) and `pandas_udf` (`foreachBatch`
with a grouped pandas UDF holding the whole batch as one group in a Python worker).

Figures: `recall` = out-of-memory runs predicted at risk >= 1.0 beforehand / out-of-memory runs; `false_alarms` =
completed runs predicted >= 1.0 / completed runs; `peak_error` = mean relative error of the predicted peak against
the observed one, for completed runs with at least one earlier observation, in the run's binding pool (the one
with the highest observed peak over its limit); `prior_peak_error` the same for the runs predicted from the prior
alone. Goals: recall 1.0, false alarms <= 0.1, peak error <= 0.25.

Why 1 GB for Python workers and not 256 MB: `spark.executor.pyspark.memory` limits a worker's address space, and
a worker that imports pandas and pyarrow cannot even load its modules under 256 MB ("failed to map segment from
shared object"), whatever the batch.

Run: `python -m bench.oom_risk` (last line: one JSON object); `--quick` runs a 2 x 2 matrix for development.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa

from opsd.checks.oom.collect import SparkRest, pool_limits, sample_bytes_per_row, stage_peaks
from opsd.checks.oom.evaluate import POOLS, Observation, evaluate, planned_batch
from opsd.checks.oom.failures import memory_pool_of_failure
from opsd.config.spark import MEMORY_METRICS_CONF
from opsd.observe.progress import PartitionOffsets
from streaming_core.cluster import Cluster, connect

WORKLOADS = ("passthrough", "to_pandas", "pandas_udf")
SIZES = (250_000, 500_000, 1_000_000, 2_000_000)
QUICK_WORKLOADS, QUICK_SIZES = ("to_pandas", "pandas_udf"), (100_000, 2_000_000)
TABLETS = 2
PAYLOAD_BYTES = 100
CONF = {
    "spark.driver.memory": "512m",
    "spark.executor.pyspark.memory": "1g",
    "spark.sql.shuffle.partitions": "1",
    "spark.ui.port": "0",
    "spark.ui.showConsoleProgress": "false",
    **MEMORY_METRICS_CONF,
}
MASTER = "local[1]"
QUEUE, CONSUMER, OUTPUT = "//bench/queue", "//bench/consumer", "//bench/output"
SCHEMA = [{"name": "data", "type": "string"}, {"name": "n", "type": "int64"}]
RUN_TIMEOUT_SECONDS = 900
RECALL_GOAL, FALSE_ALARMS_GOAL, PEAK_ERROR_GOAL = 1.0, 0.1, 0.25


def fill_queue(cluster: Cluster, rows: int, path: str = QUEUE) -> None:
    cluster.create("table", path, recursive=True, attributes={
        "dynamic": True, "tablet_count": TABLETS, "schema": SCHEMA})
    per_tablet, step = rows // TABLETS, 100_000
    for tablet in range(TABLETS):
        for lo in range(0, per_tablet, step):
            n = pa.array(range(lo, min(lo + step, per_tablet)), pa.int64())
            cluster.insert_rows(path, pa.table({"data": pa.array(["x" * PAYLOAD_BYTES] * len(n)), "n": n}),
                                tablet_index=tablet)


def measured_bytes_per_row() -> float:
    """Bytes per row as the OOM check measures them, on a small queue of the bench's rows."""
    with tempfile.TemporaryDirectory(prefix="bench-oom-sample-") as root, connect(f"local://{root}") as cluster:
        fill_queue(cluster, 2000)
        read = [PartitionOffsets(QUEUE, t, -1, 999, 999) for t in range(TABLETS)]
        per_row = sample_bytes_per_row(cluster, read)
    assert per_row is not None
    return per_row


# -- the child: one run, one micro-batch -------------------------------------------------------------------------

def to_pandas(df, batch_id: int) -> None:
    df.toPandas()


def pandas_udf(df, batch_id: int) -> None:
    from pyspark.sql import functions as F

    def whole_group(pdf):
        import pandas as pd
        return pd.DataFrame({"rows": [len(pdf)], "chars": [int(pdf["data"].str.len().sum())]})

    df.withColumn("group", F.lit("all")).groupBy("group").applyInPandas(whole_group, "rows long, chars long").collect()


def run_child(workload: str, rows: int) -> dict[str, Any]:
    """Fill a queue, run one batch of `rows` through `workload`, report its peaks or its memory failure."""
    from streaming_core import build_session

    with tempfile.TemporaryDirectory(prefix="bench-oom-") as root:
        uri = f"local://{root}/cluster"
        with connect(uri) as cluster:
            fill_queue(cluster, rows)
            cluster.create_consumer(CONSUMER)
            cluster.register_queue_consumer(QUEUE, CONSUMER)
            if workload == "passthrough":
                cluster.create("table", OUTPUT, attributes={"dynamic": True, "tablet_count": 1, "schema": SCHEMA})
        spark = build_session("bench-oom", master=MASTER, cluster=uri, conf=CONF)
        context = spark.sparkContext
        rest = SparkRest(context.uiWebUrl, context.applicationId)
        started = time.time()
        failure = None
        try:
            stream = (spark.readStream.format("yt").option("consumer_path", CONSUMER)
                      .option("max_rows_per_partition", rows // TABLETS).load(QUEUE).writeStream
                      .option("checkpointLocation", f"{root}/checkpoint").trigger(availableNow=True))
            if workload == "passthrough":
                stream = stream.format("yt").option("path", OUTPUT)
            else:
                stream = stream.foreachBatch(to_pandas if workload == "to_pandas" else pandas_udf)
            query = stream.start()
            query.awaitTermination()
        except Exception:
            failure = traceback.format_exc()
        time.sleep(1.0)  # the last executor metrics arrive with a heartbeat
        try:
            stages = rest.stages()
            peaks = stage_peaks(stages, started, time.time())
        except Exception:
            stages, peaks = traceback.format_exc(), {}
        finally:
            try:
                spark.stop()
            except Exception:
                failure = failure or traceback.format_exc()
    return {"failure": failure, "peaks": peaks, "stages": stages if not peaks else len(stages)}


# -- the parent: the matrix -----------------------------------------------------------------------------------

def run_isolated(workload: str, rows: int) -> dict[str, Any]:
    """One run in its own process; a process that dies without its JSON line died of what its output says."""
    try:
        child = subprocess.run([sys.executable, "-m", "bench.oom_risk", "--child", workload, str(rows)],
                               capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS,
                               cwd=Path(__file__).parent.parent)
    except subprocess.TimeoutExpired:
        return {"failure": "timeout", "peaks": {}, "pool": None}
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    result = json.loads(lines[-1]) if lines else {"failure": child.stderr[-5000:] or f"exit {child.returncode}",
                                                  "peaks": {}}
    result["pool"] = memory_pool_of_failure(result["failure"])
    if result["failure"] and result["pool"] is None:  # a failure that is not memory: show it, count it apart
        print(f"  {workload} {rows}: failed, not of memory: {result['failure'][-800:]}", file=sys.stderr)
    return result


def matrix(workloads: tuple[str, ...], sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    limits = pool_limits(CONF, MASTER)
    per_row = measured_bytes_per_row()
    runs = []
    print(f"bytes per row {per_row:.1f}; limits " + ", ".join(f"{p} {v / 2**20:.0f} MiB" for p, v in limits.items()))
    print(f"{'workload':12} {'rows':>10} {'risk':>6} {'pool':>13} {'predicted':>10} {'observed':>10} {'outcome':>16}")
    for workload in workloads:
        seen: dict[str, list[Observation]] = {pool: [] for pool in POOLS}
        for index, rows in enumerate(sizes):
            half = rows // TABLETS
            batch = planned_batch([PartitionOffsets(QUEUE, t, None, -1, half - 1) for t in range(TABLETS)], half,
                                  per_row)
            before = evaluate(workload, batch, limits, seen)
            started = time.perf_counter()
            result = run_isolated(workload, rows)
            outcome = "completed" if not result["failure"] else f"oom:{result['pool']}" if result["pool"] else "failed"
            peaks = result["peaks"]
            binding = max(peaks, key=lambda p: peaks[p] / limits[p], default=None) if outcome == "completed" else None
            predicted = {p.pool: p.predicted_peak_bytes for p in before.pools}
            run = {"workload": workload, "rows": rows, "risk": before.risk, "outcome": outcome, "pool": binding,
                   "predicted": predicted.get(binding), "observed": peaks.get(binding),
                   "fitted": index > 0, "seconds": time.perf_counter() - started}
            runs.append(run)
            for pool, peak in peaks.items():
                if outcome == "completed":
                    seen[pool].append(Observation(index, batch.bytes, peak))
            if result["pool"]:
                seen[result["pool"]].append(Observation(index, batch.bytes, 0.0, failed=True))
            shown = [f"{v / 2**20:>9.0f}M" if v else f"{'-':>10}" for v in (run["predicted"], run["observed"])]
            print(f"{workload:12} {rows:>10,} {run['risk']:>6.2f} {binding or '-':>13} {shown[0]} {shown[1]} "
                  f"{outcome:>16}  ({run['seconds']:.0f} s)", flush=True)
    return runs


def figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    oom = [r for r in runs if r["outcome"].startswith("oom")]
    completed = [r for r in runs if r["outcome"] == "completed"]

    def error(chosen):
        errors = [abs(r["predicted"] - r["observed"]) / r["observed"] for r in chosen if r["observed"]]
        return round(sum(errors) / len(errors), 3) if errors else None

    return {
        "runs": len(runs), "oom_runs": len(oom), "completed_runs": len(completed),
        "other_failures": len(runs) - len(oom) - len(completed),
        "recall": round(sum(r["risk"] >= 1.0 for r in oom) / len(oom), 3) if oom else None,
        "false_alarms": round(sum(r["risk"] >= 1.0 for r in completed) / len(completed), 3) if completed else None,
        "peak_error": error([r for r in completed if r["fitted"]]),
        "prior_peak_error": error([r for r in completed if not r["fitted"]]),
        "recall_goal": RECALL_GOAL, "false_alarms_goal": FALSE_ALARMS_GOAL, "peak_error_goal": PEAK_ERROR_GOAL,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 2 x 2 matrix, for development")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child[0], int(args.child[1]))))
        return
    runs = matrix(QUICK_WORKLOADS, QUICK_SIZES) if args.quick else matrix(WORKLOADS, SIZES)
    print(json.dumps({"bench": "oom_risk", **figures(runs)}))


if __name__ == "__main__":
    main()
