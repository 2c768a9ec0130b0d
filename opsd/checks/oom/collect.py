"""Collect the OOM check's facts: memory peaks Spark measured per stage, the pools' limits, bytes per queue row.

Peaks come from Spark's REST API (`/api/v1/applications/<id>/stages`: each stage's `peakExecutorMetrics`, the
highest value any executor reported while the stage ran; opsd's sessions poll them every 100 ms and include the
process tree, see `opsd.config.spark`). A batch's peak per pool is the highest over the stages submitted while it
ran: executor metrics are per process, so queries sharing executors share their peaks (conservative).

Bytes per row are measured on the queue itself: the Arrow size of a sample of the rows the query read last,
through the cluster interface's `read_tablet` (both backends). Spark's input metrics do not help: a Python data
source reports no input bytes, and progress carries rows only.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from opsd.observe.progress import PartitionOffsets
from streaming_core.cluster import Cluster

#: The executor metric that measures each pool (`peakExecutorMetrics` keys).
POOL_METRICS = {
    "jvm_heap": "JVMHeapMemory",
    "direct": "DirectPoolMemory",
    # `spark.executor.pyspark.memory` is the executor's total, split among its cores' workers, each limited in
    # address space (RLIMIT_AS). The process tree's virtual memory sums every Python process (the daemon, the
    # streaming source's runner, idle workers), each with hundreds of MB of reserved address space: over the
    # limit before any batch. Resident memory of the tree is the closer measure of what the batches take.
    "python_worker": "ProcessTreePythonRSSMemory",
}
DEFAULT_JVM_MEMORY = "1g"
SAMPLE_ROWS = 1000
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_MAX_DIRECT = re.compile(r"-XX:MaxDirectMemorySize=(\S+)")


class SparkRest:
    """The few REST calls of one Spark application's UI (`spark.sparkContext.uiWebUrl`, `applicationId`)."""

    def __init__(self, ui_url: str, app_id: str, timeout_seconds: float = 30.0) -> None:
        self.base = f"{ui_url.rstrip('/')}/api/v1/applications/{app_id}"
        self.timeout = timeout_seconds

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base}/{path}", timeout=self.timeout) as response:
            return json.load(response)

    def stages(self) -> list[dict[str, Any]]:
        """Every stage the UI still holds (`spark.ui.retainedStages`), with its peaks."""
        return self.get("stages")


def size_bytes(text: str, default_unit: str = "m") -> int:
    """A Spark memory size (`512m`, `2g`, `1024` = MiB for the memory keys) in bytes."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a Spark memory size: {text!r} (expected e.g. 512m, 2g)")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or default_unit).lower()])


def pool_limits(conf: Mapping[str, str], master: str) -> dict[str, float]:
    """Each pool's limit from the Spark conf: in local mode the driver runs the tasks, else the executors.

    Direct memory defaults to the heap's size (the JVM's rule); Python workers are limited only when
    `spark.executor.pyspark.memory` is set.
    """
    role = "driver" if master.startswith("local") else "executor"
    heap = size_bytes(conf.get(f"spark.{role}.memory", DEFAULT_JVM_MEMORY))
    direct = _MAX_DIRECT.search(conf.get(f"spark.{role}.extraJavaOptions", ""))
    limits: dict[str, float] = {"jvm_heap": heap, "direct": size_bytes(direct.group(1), "") if direct else heap}
    python = conf.get("spark.executor.pyspark.memory")
    if python:
        limits["python_worker"] = size_bytes(python)
    return limits


def spark_time(text: str) -> float:
    """The REST API's times (`2026-11-22T23:50:00.123GMT`) in unix seconds."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=UTC).timestamp()


def stage_peaks(stages: Iterable[Mapping[str, Any]], start: float, end: float) -> dict[str, float]:
    """Per pool, the highest peak of the stages submitted in `[start, end]` (unix seconds); pools no stage
    measured are left out."""
    peaks: dict[str, float] = {}
    for stage in stages:
        submitted, metrics = stage.get("submissionTime"), stage.get("peakExecutorMetrics")
        if not submitted or not metrics or not start <= spark_time(submitted) <= end:
            continue
        for pool, key in POOL_METRICS.items():
            value = metrics.get(key)
            if value:
                peaks[pool] = max(peaks.get(pool, 0.0), float(value))
    return peaks


def sample_bytes_per_row(cluster: Cluster, partitions: Sequence[PartitionOffsets], max_rows: int = SAMPLE_ROWS, *,
                         ahead: bool = False) -> float | None:
    """Arrow bytes per row of up to `max_rows` rows spread over the partitions: the rows last read, or with `ahead`
    the next rows to read (a query about to start). None when none is readable (nothing read yet, nothing ahead,
    or trimmed away)."""
    trimmed: dict[str, dict[int, int]] = {}
    spans = []
    per_partition = max(1, max_rows // max(1, len(partitions)))
    for part in partitions:
        if part.end is None or (ahead and part.latest is None):
            continue
        if part.queue not in trimmed:
            trimmed[part.queue] = {t.tablet_index: t.trimmed_row_count for t in cluster.get_tablet_infos(part.queue)}
        first = trimmed[part.queue].get(part.partition, 0)
        if ahead:
            lower = max(part.end + 1, first)
            upper = min(part.latest + 1, lower + per_partition)
        else:
            lower, upper = max(part.end + 1 - per_partition, first), part.end + 1
        if lower < upper:
            spans.append((part.queue, part.partition, lower, upper))
    rows = nbytes = 0
    for queue, partition, lower, upper in spans:
        for batch in cluster.read_tablet(queue, partition, lower, upper, max_rows=upper - lower):
            rows += batch.num_rows
            nbytes += batch.nbytes
    return nbytes / rows if rows else None


def next_partitions(cluster: Cluster, queue: str, consumer: str) -> list[PartitionOffsets]:
    """Where a query that has not read yet stands on each partition of its queue: its consumer's offset (never
    below the trimmed rows) as the last row read, the queue's last row as the latest."""
    offsets = cluster.get_consumer_offsets(consumer, queue)
    return [PartitionOffsets(queue, t.tablet_index, None,
                             max(offsets.get(t.tablet_index, 0), t.trimmed_row_count) - 1, t.total_row_count - 1)
            for t in cluster.get_tablet_infos(queue)]
