"""The real-Spark scenarios of `bench.autotune`, each run in its own process (its own driver with
`spark.driver.memory=512m`) over a workload that dies of memory when its batches are too large — `foreachBatch`
collecting each micro-batch to the driver with `toPandas()` — run by opsd (`opsd.runtime.lifecycle`). Each run is an
`availableNow` pipeline restarted by the supervisor at most `MAX_RESTARTS` times; a failure is an out-of-memory one
when `opsd.observe.failures.out_of_memory` says so.

1. (`memory`) A backlog of `ROWS` rows of `ROW_BYTES` bytes in a `PARTITIONS`-tablet queue, twice: with the
   auto-tuner off and no cap, then with the tuner in mode apply (its defaults) starting uncapped.
6. (`width`) Rows whose width grows 10x mid-stream: `WIDTH_ROWS` rows of `NARROW_BYTES` bytes, then as many of
   `10 x NARROW_BYTES`, per partition of a queue with `$cumulative_data_weight`. Three runs with the tuner off: the
   row cap `WIDTH_MAX_ROWS` alone (a third of the driver's heap in narrow rows: safe for them, ten times that in
   wide ones), the same row cap with the byte cap `WIDTH_MAX_BYTES`; and one with the tuner in mode apply starting
   at that row cap alone (before the start it caps bytes by the OOM model judged on the narrow rows ahead).

Run by `python -m bench.autotune`; alone: `python -m bench.autotune_memory [--width]` (last line: one JSON object).
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
WIDTH_ROWS, NARROW_BYTES = 200_000, 100
WIDTH_MAX_ROWS, WIDTH_MAX_BYTES = 150_000, 16 << 20
WIDTH_QUEUE = "//bench/widening"
FILL_ROWS = 50_000


def to_pandas(df: Any, batch_id: int) -> None:
    """The workload: the whole micro-batch in the driver."""
    df.toPandas()


def fill(uri: str, queue: str, widths: tuple[tuple[int, int], ...], schema: list[dict[str, str]]) -> None:
    """A `PARTITIONS`-tablet queue, each tablet given `rows` rows of `width` bytes for each (rows, width) in order."""
    with connect(uri) as cluster:
        cluster.create("table", queue, recursive=True, attributes={
            "dynamic": True, "tablet_count": PARTITIONS, "schema": schema})
        for tablet in range(PARTITIONS):
            for rows, width in widths:
                for _ in range(0, rows, FILL_ROWS):
                    cluster.insert_rows(queue, pa.table({"$tablet_index": pa.array([tablet] * FILL_ROWS, pa.int64()),
                                                         "data": pa.array(["x" * width] * FILL_ROWS)}))


def run(uri: str, root: str, name: str, mode: str, queue: str = QUEUE, options: dict[str, str] | None = None
        ) -> dict[str, Any]:
    """One opsd run of the pipeline (`options`: the source's besides its consumer): out-of-memory failures, whether
    the backlog drained, seconds, the caps in force at each start."""
    config = OpsdConfig.model_validate({
        "cluster": uri, "http": {"port": 0},
        "spark": {"master": "local[2]", "conf": {"spark.driver.memory": "512m"}},
        "pipelines": [{
            "name": name, "source": {"path": queue, "options": {"consumer_path": f"//bench/{name}", **(options or {})}},
            "sink": {"format": "foreachBatch", "callable": "bench.autotune_memory:to_pandas"},
            "trigger": {"available_now": True}, "checkpoint_location": f"{root}/{name}",
            "restart": {"initial_backoff_seconds": 1, "max_restarts": MAX_RESTARTS},
            "autotune": {"mode": mode}}]})
    with connect(uri) as cluster:
        cluster.create_consumer(f"//bench/{name}")
        cluster.register_queue_consumer(queue, f"//bench/{name}")
    failures: list[str] = []
    started = time.perf_counter()
    with lifecycle.running(config) as app:
        supervisor = app.runner.supervisors[0]

        def counting(query: str, failure: str | None) -> None:
            if failure is not None:
                failures.append(failure)

        def cap_at_start(query: str, failure: str | None) -> None:
            with connect(uri) as cluster:
                tuning = read_tuning(cluster, config.pipelines[0].source_tuning_path())
            caps.append(tuning.max_rows_per_partition)
            byte_caps.append(tuning.max_bytes_per_partition)

        caps: list[int | None] = []
        byte_caps: list[int | None] = []
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
            "drained": drained, "seconds": round(time.perf_counter() - started, 1), "caps_at_start": caps,
            "byte_caps_at_start": byte_caps}


def in_child(root: str, name: str, mode: str, queue: str = QUEUE, options: dict[str, str] | None = None
             ) -> dict[str, Any]:
    """`run` in a child process: a driver that dies of memory must not take the next run with it."""
    done = subprocess.run([sys.executable, "-m", "bench.autotune_memory", "--run", root, name, mode, queue,
                           json.dumps(options or {})], capture_output=True, text=True, timeout=3600)
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


def width() -> dict[str, Any]:
    """Scenario 6: rows 10x wider mid-stream, under the row cap alone, with the byte cap, and tuned."""
    schema = [{"name": "data", "type": "string"}, {"name": "$cumulative_data_weight", "type": "int64"}]
    rows_only = {"max_rows_per_partition": str(WIDTH_MAX_ROWS)}
    with tempfile.TemporaryDirectory(prefix="bench-autotune-width-") as root:
        fill(f"local://{root}/cluster", WIDTH_QUEUE, ((WIDTH_ROWS, NARROW_BYTES), (WIDTH_ROWS, 10 * NARROW_BYTES)),
             schema)
        runs = {}
        for name, mode, options in (("rows_only", "off", rows_only),
                                    ("byte_cap", "off", {**rows_only, "max_bytes_per_partition": str(WIDTH_MAX_BYTES)}),
                                    ("tuned", "apply", rows_only)):
            runs[name] = in_child(root, name, mode, WIDTH_QUEUE, options)
            print(f"{name}:", json.dumps(runs[name]), file=sys.stderr)
    return {"width_rows_only_oom_failures": runs["rows_only"]["oom_failures"],
            "width_rows_only_drained": runs["rows_only"]["drained"],
            "width_byte_cap_oom_failures": runs["byte_cap"]["oom_failures"],
            "width_byte_cap_drained": runs["byte_cap"]["drained"],
            "width_byte_cap_seconds": runs["byte_cap"]["seconds"],
            "width_tuned_oom_failures": runs["tuned"]["oom_failures"], "width_tuned_drained": runs["tuned"]["drained"],
            "width_tuned_byte_caps_at_start": runs["tuned"].get("byte_caps_at_start"),
            "width_tuned_caps_at_start": runs["tuned"].get("caps_at_start"),
            "width_rows_only_failure_messages": runs["rows_only"].get("failure_messages",
                                                                      [runs["rows_only"].get("error")]),
            "width_rows": WIDTH_ROWS, "width_narrow_bytes": NARROW_BYTES, "width_max_rows": WIDTH_MAX_ROWS,
            "width_max_bytes": WIDTH_MAX_BYTES}


def main() -> None:
    configure_logging(level="WARNING", json_lines=True)
    if sys.argv[1:2] == ["--run"]:
        root, name, mode, queue, options = sys.argv[2:7]
        print(json.dumps(run(f"local://{root}/cluster", root, name, mode, queue, json.loads(options))))
        return
    if sys.argv[1:2] == ["--width"]:
        print(json.dumps(width()))
        return
    with tempfile.TemporaryDirectory(prefix="bench-autotune-memory-") as root:
        fill(f"local://{root}/cluster", QUEUE, ((ROWS // PARTITIONS, ROW_BYTES),), [{"name": "data", "type": "string"}])
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
