"""A child process for the memory sampler's real-Spark test (`tests/test_oom_sampler.py`): its own local session
with a Python worker memory limit, a `yt` streaming query (so that the streaming source's runner runs too), and a job
whose tasks report the address-space limit they run under. Prints one JSON line.

Run: `python tests/scripts/oom_sampler_session.py ROOT`.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import pyarrow as pa

from opsd.checks.oom.collect import pool_limits
from opsd.checks.oom.sampler import PYTHON_WORKER, MemorySampler, descendants, python_workers
from streaming_core import build_session
from streaming_core.cluster import connect

CONF = {"spark.executor.pyspark.memory": "768m", "spark.executor.cores": "2", "spark.ui.enabled": "false"}
MASTER = "local[2]"
RUNNER = "python_streaming_source_runner"


def limit_of_task(_: object) -> list[tuple[int, int]]:
    """In a Python worker: its pid and the address-space limit it runs under."""
    import os

    time.sleep(1.0)  # long enough for the sampler to see the worker at work
    return [(os.getpid(), resource.getrlimit(resource.RLIMIT_AS)[0])]


def main(root: Path) -> None:
    uri = f"local://{root}/cluster"
    with connect(uri) as cluster:
        cluster.create("table", "//q", recursive=True, attributes={
            "dynamic": True, "tablet_count": 1, "schema": [{"name": "data", "type": "string"}]})
        cluster.insert_rows("//q", pa.table({"data": ["x" * 100] * 1000}), tablet_index=0)
        cluster.create_consumer("//c")
        cluster.register_queue_consumer("//q", "//c")
    spark = build_session("oom-sampler", master=MASTER, cluster=uri, conf=CONF)
    sampler = MemorySampler.for_spark(spark.sparkContext).start()
    query = (spark.readStream.format("yt").option("consumer_path", "//c").load("//q").writeStream.format("noop")
             .option("checkpointLocation", str(root / "checkpoint")).trigger(processingTime="1 hour").start())
    while query.lastProgress is None:
        time.sleep(0.2)
    started = time.time()
    seen = spark.sparkContext.parallelize(range(2), 2).mapPartitions(limit_of_task).collect()
    ended = time.time()
    time.sleep(0.5)
    jvm = sampler.root_pid
    workers = python_workers(jvm)
    runners = [pid for pid, _, command in descendants(jvm) if RUNNER in command]
    query.stop()
    sampler.stop()
    print(json.dumps({
        "rlimit_as": seen[0][1], "task_pids": [pid for pid, _ in seen], "worker_pids": workers,
        "pool_limit": pool_limits({**CONF, "spark.master": MASTER}, MASTER)[PYTHON_WORKER],
        "python_peak": sampler.window(started, ended)[PYTHON_WORKER].peak_bytes,
        "source_runner_excluded": bool(runners) and not set(runners) & set(workers),
    }))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
