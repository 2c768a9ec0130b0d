"""Scenario 1 of `bench.autotune`, in its own process (its own driver with `spark.driver.memory=512m`): a workload
that dies of memory uncapped — `foreachBatch` collecting each micro-batch to the driver with `toPandas()` — over a
backlog of `ROWS` rows of `ROW_BYTES` bytes in a `PARTITIONS`-tablet queue, run by opsd (`opsd.runtime.lifecycle`)
twice: with the auto-tuner off and no cap, then with the tuner in mode apply (its defaults) starting uncapped.
Each run is an `availableNow` pipeline restarted by the supervisor at most `MAX_RESTARTS` times; a failure is an
out-of-memory one when `opsd.observe.failures.out_of_memory` says so.

Run by `python -m bench.autotune`; alone: `python -m bench.autotune_memory` (last line: one JSON object).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from typing import Any

import pyarrow as pa

from opsd.config.models import OpsdConfig
from opsd.observe.failures import failure_message, out_of_memory
from opsd.runtime import lifecycle
from opsd.telemetry.logs import configure_logging
from streaming_core.cluster import connect
from streaming_core.tuning import read_tuning

ROWS, ROW_BYTES, PARTITIONS = 600_000, 1024, 2
MAX_RESTARTS = 2
QUEUE = "//bench/queue"


def to_pandas(df: Any, batch_id: int) -> None:
    """The workload: the whole micro-batch in the driver."""
    df.toPandas()


def fill(uri: str) -> None:
    with connect(uri) as cluster:
        cluster.create("table", QUEUE, recursive=True, attributes={
            "dynamic": True, "tablet_count": PARTITIONS, "schema": [{"name": "data", "type": "string"}]})
        for tablet in range(PARTITIONS):
            for _ in range(0, ROWS // PARTITIONS, 50_000):
                cluster.insert_rows(QUEUE, pa.table({"$tablet_index": pa.array([tablet] * 50_000, pa.int64()),
                                                     "data": pa.array(["x" * ROW_BYTES] * 50_000)}))


def run(uri: str, root: str, name: str, mode: str) -> dict[str, Any]:
    """One opsd run of the pipeline: out-of-memory failures, whether the backlog drained, seconds."""
    config = OpsdConfig.model_validate({
        "cluster": uri, "http": {"port": 0},
        "spark": {"master": "local[2]", "conf": {"spark.driver.memory": "512m"}},
        "pipelines": [{
            "name": name, "source": {"path": QUEUE, "options": {"consumer_path": f"//bench/{name}"}},
            "sink": {"format": "foreachBatch", "callable": "bench.autotune_memory:to_pandas"},
            "trigger": {"available_now": True}, "checkpoint_location": f"{root}/{name}",
            "restart": {"initial_backoff_seconds": 1, "max_restarts": MAX_RESTARTS},
            "autotune": {"mode": mode}}]})
    with connect(uri) as cluster:
        cluster.create_consumer(f"//bench/{name}")
        cluster.register_queue_consumer(QUEUE, f"//bench/{name}")
    failures: list[str] = []
    started = time.perf_counter()
    with lifecycle.running(config) as app:
        supervisor = app.runner.supervisors[0]

        def counting(query: str, failure: str | None) -> None:
            if failure is not None:
                failures.append(failure)

        def cap_at_start(query: str, failure: str | None) -> None:
            with connect(uri) as cluster:
                caps.append(read_tuning(cluster, config.pipelines[0].source_tuning_path()).max_rows_per_partition)

        caps: list[int | None] = []
        supervisor._before_start = (counting, *supervisor._before_start, cap_at_start)
        app.runner.start()
        supervisor.finished.wait(1800)
        drained = (not supervisor.gave_up and supervisor.permanent_failure is None
                   and supervisor.driver_gone is None)
        last = app.monitor.recorder.status.get(name)
        if not drained and last is not None and last.exception:  # the failure it gave up on
            failures.append(last.exception)
    return {"oom_failures": sum(out_of_memory(f) for f in failures), "failures": len(failures),
            "failure_messages": sorted({failure_message(f)[:160] for f in failures}),
            "drained": drained, "seconds": round(time.perf_counter() - started, 1), "caps_at_start": caps}


def in_child(root: str, name: str, mode: str) -> dict[str, Any]:
    """`run` in a child process: a driver that dies of memory must not take the next run with it."""
    done = subprocess.run([sys.executable, "-m", "bench.autotune_memory", "--run", root, name, mode],
                          capture_output=True, text=True, timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:  # the driver died before it could say anything: count that as the failure it is
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"oom_failures": int(out_of_memory(done.stderr)), "failures": 1, "drained": False,
                "seconds": None, "error": tail, "driver_died_of_oom": out_of_memory(done.stderr)}
    result = json.loads(lines[-1])
    # In local mode a task's OutOfMemoryError kills the driver's JVM (Spark's uncaught-exception handler): the
    # restarts then fail to reach it (ConnectionRefusedError) and no failure text names the memory. Spark's log does.
    died = "java.lang.OutOfMemoryError" in done.stderr
    return {**result, "driver_died_of_oom": died, "oom_failures": max(result["oom_failures"], int(died))}


def main() -> None:
    configure_logging(level="WARNING", json_lines=True)
    if sys.argv[1:2] == ["--run"]:
        root, name, mode = sys.argv[2:5]
        print(json.dumps(run(f"local://{root}/cluster", root, name, mode)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-autotune-memory-") as root:
        fill(f"local://{root}/cluster")
        uncapped = in_child(root, "uncapped", "off")
        print("uncapped:", json.dumps(uncapped), file=sys.stderr)
        tuned = in_child(root, "tuned", "apply")
        print("tuned:", json.dumps(tuned), file=sys.stderr)
    print(json.dumps({"uncapped_oom_failures": uncapped["oom_failures"], "uncapped_drained": uncapped["drained"],
                      "oom_failures": tuned["oom_failures"], "tuned_drained": tuned["drained"],
                      "tuned_failures": tuned["failures"], "tuned_seconds": tuned["seconds"],
                      "tuned_caps_at_start": tuned.get("caps_at_start"),
                      "uncapped_driver_died_of_oom": uncapped["driver_died_of_oom"],
                      "tuned_driver_died_of_oom": tuned["driver_died_of_oom"],
                      "tuned_failure_messages": tuned.get("failure_messages", [tuned.get("error")]),
                      "memory_rows": ROWS, "memory_row_bytes": ROW_BYTES}))


if __name__ == "__main__":
    main()
