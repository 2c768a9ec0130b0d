"""Collect the OOM check's facts: memory a batch used per pool, the pools' limits, bytes per queue row.

Each pool is measured the way its limit is enforced (`opsd.checks.oom.sampler` says why Spark's own metrics do
not do for two of them):
- `jvm_heap`: the heap used (`JVMHeapMemory`), against `-Xmx` (`spark.driver.memory` in local mode, else
  `spark.executor.memory`), with Spark's execution memory (`OnHeapExecutionMemory`: sort, aggregation and join
  buffers) and whether the batch spilled, since execution memory stops growing at its region and spills.
- `direct`: in local mode, Netty's count and the JVM's direct buffer pool as the sampler reads them, else
  `DirectPoolMemory`, against `-XX:MaxDirectMemorySize` (the heap's size unless set).
- `python_worker`: in local mode, the address space of the fattest Python worker (the sampler), against its share
  of `spark.executor.pyspark.memory` (divided by `spark.executor.cores`, 1 unless set); elsewhere the resident
  memory of the executor's Python process tree, an approximation (a sum over processes, not the limited quantity).
- `driver_result`: the serialized task results of the batch's jobs (`resultSize`), against
  `spark.driver.maxResultSize` (1g unless set; 0 = no limit): what `collect()` and `toPandas()` bring to the driver.

Peaks come from Spark's REST API (`/api/v1/applications/<id>/stages`: each stage's `peakExecutorMetrics`, the
highest value any executor reported while the stage ran; opsd's sessions poll them every 200 ms and include the
process tree, see `opsd.config.spark`). A batch's peak per pool is the highest over the stages submitted while it
ran: executor metrics are per process, so queries sharing executors share their peaks (conservative).

Bytes per row are measured on the queue itself: the Arrow size of a sample of the rows the query read last,
through the cluster interface's `read_kept` (both backends; rows trimmed meanwhile are skipped), and their
YTsaurus data weight beside it (what the source's byte cap counts). Spark's input metrics do not help: a Python data
source reports no input bytes, and progress carries rows only.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opsd.checks.oom.evaluate import DIRECT, DRIVER_RESULT, HEAP, PYTHON_WORKER, BatchUsage, PoolUsage
from opsd.checks.oom.sampler import PoolWindow
from opsd.observe.progress import PartitionOffsets
from streaming_core.cluster import Cluster
from streaming_core.cluster.data_weight import row_data_weights

#: The executor metric that measures each pool (`peakExecutorMetrics` keys) when the sampler does not.
POOL_METRICS = {
    HEAP: "JVMHeapMemory",
    DIRECT: "DirectPoolMemory",
    PYTHON_WORKER: "ProcessTreePythonRSSMemory",
}
EXECUTION_METRIC = "OnHeapExecutionMemory"
DEFAULT_JVM_MEMORY = "1g"
DEFAULT_MAX_RESULT_SIZE = "1g"
#: Heap Spark's memory manager keeps out of its unified region (`UnifiedMemoryManager.RESERVED_SYSTEM_MEMORY_BYTES`).
RESERVED_MEMORY = 300 * 1024 * 1024
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

    Direct memory defaults to the heap's size (the JVM's rule). Python workers are limited only when
    `spark.executor.pyspark.memory` is set, each to its share: the executor's total over `spark.executor.cores` (1
    unless set, as Spark counts it for the default resource profile, local mode included). The driver's results are
    limited by `spark.driver.maxResultSize` unless it is 0.
    """
    role = "driver" if master.startswith("local") else "executor"
    heap = size_bytes(conf.get(f"spark.{role}.memory", DEFAULT_JVM_MEMORY))
    direct = _MAX_DIRECT.search(conf.get(f"spark.{role}.extraJavaOptions", ""))
    limits: dict[str, float] = {HEAP: heap, DIRECT: size_bytes(direct.group(1), "") if direct else heap}
    python = conf.get("spark.executor.pyspark.memory")
    if python:
        cores = int(conf.get("spark.executor.cores", "1"))
        if cores < 1:
            raise ValueError(f"spark.executor.cores must be at least 1, not {cores}")
        limits[PYTHON_WORKER] = size_bytes(python) // cores
    results = size_bytes(conf.get("spark.driver.maxResultSize", DEFAULT_MAX_RESULT_SIZE))
    if results > 0:
        limits[DRIVER_RESULT] = results
    return limits


def execution_region(conf: Mapping[str, str], master: str) -> float | None:
    """The most on-heap execution memory Spark's unified memory manager grants: (heap - 300 MiB reserved) x
    `spark.memory.fraction` (0.6 unless set), all of it when storage holds nothing. None when execution memory is
    off the heap (`spark.memory.offHeap.enabled`)."""
    if conf.get("spark.memory.offHeap.enabled", "false").lower() == "true":
        return None
    heap = pool_limits(conf, master)[HEAP]
    return max(0.0, heap - RESERVED_MEMORY) * float(conf.get("spark.memory.fraction", "0.6"))


def spark_time(text: str) -> float:
    """The REST API's times (`2026-11-22T23:50:00.123GMT`) in unix seconds."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class StageFacts:
    """What the stages submitted in a window measured: per pool the highest peak, Spark's execution memory at its
    highest, the bytes spilled and the task results' bytes."""

    peaks: Mapping[str, float] = field(default_factory=dict)
    execution_bytes: float = 0.0
    spilled_bytes: float = 0.0
    result_bytes: float = 0.0

    @property
    def measured(self) -> bool:
        return bool(self.peaks)


def stage_facts(stages: Iterable[Mapping[str, Any]], start: float, end: float) -> StageFacts:
    """The facts of the stages submitted in `[start, end]` (unix seconds); pools no stage measured are left out."""
    peaks: dict[str, float] = {}
    execution = spilled = results = 0.0
    for stage in stages:
        submitted = stage.get("submissionTime")
        if not submitted or not start <= spark_time(submitted) <= end:
            continue
        spilled += float(stage.get("memoryBytesSpilled") or 0)
        results += float(stage.get("resultSize") or 0)
        metrics = stage.get("peakExecutorMetrics") or {}
        execution = max(execution, float(metrics.get(EXECUTION_METRIC) or 0))
        for pool, key in POOL_METRICS.items():
            value = metrics.get(key)
            if value:
                peaks[pool] = max(peaks.get(pool, 0.0), float(value))
    return StageFacts(peaks, execution, spilled, results)


def batch_usage(facts: StageFacts, sampled: Mapping[str, PoolWindow] | None) -> BatchUsage:
    """What one batch used per pool: the stages' peaks, and the sampler's window where a sampler runs (`sampled` not
    None): the Python workers measured its way replace the process tree, direct memory is the higher of the two.
    The driver's results come with the stages. Empty when nothing measured the batch (a stage too short to carry a
    peak, and no sampler)."""
    pools: dict[str, PoolUsage] = {pool: PoolUsage(peak) for pool, peak in facts.peaks.items()
                                   if sampled is None or pool != PYTHON_WORKER}
    for pool, seen in (sampled or {}).items():
        pools[pool] = PoolUsage(max(seen.peak_bytes, pools[pool].peak_bytes if pool in pools else 0.0),
                                seen.baseline_bytes, sampled=True)
    if facts.measured:
        pools[DRIVER_RESULT] = PoolUsage(facts.result_bytes)
    return BatchUsage(pools, facts.execution_bytes, facts.spilled_bytes > 0)


@dataclass(frozen=True)
class RowSizes:
    """Per row of a sample: its Arrow bytes (what the OOM model counts) and its YTsaurus data weight (what the
    source's byte cap counts)."""

    arrow_bytes: float
    data_weight: float

    @property
    def arrow_per_weight(self) -> float:
        return self.arrow_bytes / self.data_weight if self.data_weight > 0 else 1.0


def sample_bytes_per_row(cluster: Cluster, partitions: Sequence[PartitionOffsets], max_rows: int = SAMPLE_ROWS, *,
                         ahead: bool = False, trimmed: Mapping[str, Mapping[int, int]] | None = None) -> float | None:
    """Arrow bytes per row of `sample_row_sizes`' sample; None when none is readable."""
    sizes = sample_row_sizes(cluster, partitions, max_rows, ahead=ahead, trimmed=trimmed)
    return None if sizes is None else sizes.arrow_bytes


def sample_row_sizes(cluster: Cluster, partitions: Sequence[PartitionOffsets], max_rows: int = SAMPLE_ROWS, *,
                     ahead: bool = False, trimmed: Mapping[str, Mapping[int, int]] | None = None) -> RowSizes | None:
    """Arrow bytes and data weight per row of up to `max_rows` rows spread over the partitions: the rows last read,
    or with `ahead` the next rows to read (a query about to start). None when none is readable (nothing read yet,
    nothing ahead, or trimmed away). `trimmed`: the trimmed row counts per queue and partition the cycle's
    positions hold; the counters of a queue they do not hold are read here."""
    trimmed = dict(trimmed or {})
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
    rows = nbytes = weight = 0
    for queue, partition, lower, upper in spans:
        for batch in cluster.read_kept(queue, partition, lower, upper, max_rows=upper - lower):
            rows += batch.num_rows
            nbytes += batch.nbytes
            weight += int(row_data_weights(batch).sum())
    return RowSizes(nbytes / rows, weight / rows) if rows else None


def next_partitions(cluster: Cluster, queue: str, consumer: str) -> list[PartitionOffsets]:
    """Where a query that has not read yet stands on each partition of its queue: its consumer's offset (never
    below the trimmed rows) as the last row read, the queue's last row as the latest."""
    offsets = cluster.get_consumer_offsets(consumer, queue)
    return [PartitionOffsets(queue, t.tablet_index, None,
                             max(offsets.get(t.tablet_index, 0), t.trimmed_row_count) - 1, t.total_row_count - 1)
            for t in cluster.get_tablet_infos(queue)]
