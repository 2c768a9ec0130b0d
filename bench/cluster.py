"""Embedded cluster throughput: append and chunked read, in one process and in two at once.

`python -m bench.cluster` (from the repository root, in the venv). Rows carry one 100-byte string, the
payload of the throughput prototype in the architecture notes. Appends go in batches of 10k rows, as a
producer or the sink would send them, once from Python dicts (the honest producer path: schema checks
and conversion included) and once from Arrow tables (the sink's path). Reads use `read_tablet` with its
default chunk bounds, as the source does. The two-process figures are aggregates: two spawned processes,
each on its own tablet of one queue, started together; rows of both / wall time from the first start to
the last finish. The last printed line is one JSON object for scripts and CI logs.
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from streaming_core.cluster import Cluster, connect

PAYLOAD_BYTES = 100
BATCH_ROWS = 10_000
ROWS = 400_000  # per measurement and process: long enough to be steady, short enough for < 60 s in all
APPEND_GOAL = 300_000
READ_GOAL = 700_000
QUEUE = "//bench/queue"
SCHEMA = [{"name": "data", "type": "string", "required": True}]
SPAWN = multiprocessing.get_context("spawn")


def dict_batches(rows: int) -> list[list[dict[str, Any]]]:
    payloads = [f"{i:012d}".ljust(PAYLOAD_BYTES, "x") for i in range(BATCH_ROWS)]
    return [[{"data": p} for p in payloads] for _ in range(rows // BATCH_ROWS)]


def arrow_batches(rows: int) -> list[pa.Table]:
    payloads = pa.array([f"{i:012d}".ljust(PAYLOAD_BYTES, "x") for i in range(BATCH_ROWS)], pa.string())
    return [pa.table({"data": payloads}) for _ in range(rows // BATCH_ROWS)]


def append(cluster: Cluster, batches: list, tablet: int) -> int:
    for batch in batches:
        cluster.insert_rows(QUEUE, batch, tablet_index=tablet)
    return sum(len(b) for b in batches)


def read(cluster: Cluster, tablet: int) -> int:
    info = cluster.get_tablet_infos(QUEUE)[tablet]
    batches = cluster.read_tablet(QUEUE, tablet, info.trimmed_row_count, info.total_row_count)
    return sum(b.num_rows for b in batches)


#: Measurement name -> (input builder or None, operation). Each runs on one tablet.
MEASUREMENTS: dict[str, tuple[Callable[[int], list] | None, Callable[..., int]]] = {
    "append dict rows": (dict_batches, append),
    "append Arrow tables": (arrow_batches, append),
    "chunked read into Arrow": (None, read),
}


def measure(uri: str, name: str, tablet: int, ready: Callable[[], object]) -> tuple[int, float, float]:
    """Rows done and the wall-clock start and end of one measurement. Inputs are built and the connection
    opened before `ready()` returns (a barrier when several processes must start together)."""
    build, operation = MEASUREMENTS[name]
    cluster = connect(uri)
    args = (build(ROWS),) if build else ()
    cluster.get_tablet_infos(QUEUE)
    ready()
    start = time.time()
    rows = operation(cluster, *args, tablet)
    return rows, start, time.time()


def _worker(uri: str, name: str, tablet: int, barrier: Any, results: Any) -> None:
    results.put(measure(uri, name, tablet, barrier.wait))


def one_process(uri: str, name: str) -> float:
    rows, start, end = measure(uri, name, 0, lambda: None)
    return rows / (end - start)


def two_processes(uri: str, name: str) -> float:
    """Aggregate rows/s of two processes at once, on tablets 1 and 2."""
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    procs = [SPAWN.Process(target=_worker, args=(uri, name, t, barrier, results)) for t in (1, 2)]
    for p in procs:
        p.start()
    done = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    return sum(r for r, _, _ in done) / (max(e for _, _, e in done) - min(s for _, s, _ in done))


def run(uri: str) -> dict[str, dict[str, float]]:
    """rows/s per measurement: {"append dict rows": {"one": ..., "two": ...}, ...}, in order (reads last,
    so that they find the rows the appends wrote)."""
    cluster = connect(uri)
    cluster.create("table", QUEUE, recursive=True, attributes={"dynamic": True, "schema": SCHEMA, "tablet_count": 3})
    return {name: {"one": one_process(uri, name), "two": two_processes(uri, name)} for name in MEASUREMENTS}


def report(figures: dict[str, dict[str, float]]) -> str:
    lines = [f"embedded cluster, {PAYLOAD_BYTES}-byte rows, {BATCH_ROWS:,} rows per append, {ROWS:,} rows each",
             f"{'measurement':<26}{'1 process':>14}{'2 processes':>16}"]
    lines += [f"{name:<26}{f['one']:>14,.0f}{f['two']:>16,.0f}" for name, f in figures.items()]
    lines.append(f"goals (1 process): append >= {APPEND_GOAL:,} rows/s, read >= {READ_GOAL:,} rows/s")
    return "\n".join(lines)


def summary(figures: dict[str, dict[str, float]]) -> dict[str, Any]:
    append_dict, append_arrow = figures["append dict rows"], figures["append Arrow tables"]
    reads = figures["chunked read into Arrow"]
    return {
        "bench": "cluster", "append_rows_per_s": round(append_dict["one"]), "read_rows_per_s": round(reads["one"]),
        "append_goal": APPEND_GOAL, "read_goal": READ_GOAL,
        "append_arrow_rows_per_s": round(append_arrow["one"]),
        "append_rows_per_s_2proc": round(append_dict["two"]),
        "append_arrow_rows_per_s_2proc": round(append_arrow["two"]),
        "read_rows_per_s_2proc": round(reads["two"]),
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as root:
        figures = run(f"local://{root}")
    print(report(figures))
    print(json.dumps(summary(figures)))


if __name__ == "__main__":
    main()
