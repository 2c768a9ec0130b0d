"""Measuring a micro-batch's parts where they happen, and storing them for opsd (what the parts are, who measures
which and where they are stored: `streaming_core.phases`)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import Any, TypeVar

from pyspark import TaskContext

from .cluster import Cluster, ClusterError, NoSuchPathError
from .cluster.base import DOCUMENT
from .cluster.timing import DECODE
from .log import get_logger
from .phases import SLOTS, BatchRecords, TaskTimes, batch_records, phases_path

log = get_logger(__name__)
T = TypeVar("T")
#: The local property Spark sets on a micro-batch's jobs: its batch id, which every task of the batch sees.
BATCH_ID_PROPERTY = "streaming.sql.batchId"


_first_task = True


def worker_start_seconds() -> float:
    """At a process's first call, its age (how long Spark took to start this Python worker and hand it the task);
    0 afterwards (a reused worker) and where the process's start time is unknown."""
    global _first_task
    if not _first_task:
        return 0.0
    _first_task = False
    try:
        with open("/proc/self/stat", "rb") as stat:
            start_ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith(b"btime"))
    except (OSError, ValueError, IndexError, StopIteration):
        return 0.0
    return max(0.0, time.time() - boot - start_ticks / os.sysconf("SC_CLK_TCK"))


def current_batch_id() -> int | None:
    """In a Spark task, the micro-batch it belongs to (None in a batch query's task or outside Spark)."""
    context = TaskContext.get()
    value = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    return int(value) if value is not None and value.lstrip("-").isdigit() else None


class TaskClock:
    """One task's clock (a Spark worker runs one task at a time): wraps what the task pulls, timing its waits apart
    from the decoding done inside them (`streaming_core.cluster.timing.DECODE`)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.worker_start = worker_start_seconds()
        self.waiting = 0.0
        self.decoding = 0.0

    def timed(self, items: Iterator[T]) -> Iterator[T]:
        """`items`, with the time spent getting each one counted (its decoding apart)."""
        while True:
            decoded_before, started = DECODE.seconds, time.perf_counter()
            item = next(items, _END)
            decoded = DECODE.seconds - decoded_before
            self.waiting += max(0.0, time.perf_counter() - started - decoded)
            self.decoding += decoded
            if item is _END:
                return
            yield item  # type: ignore[misc]

    def decoded(self, seconds: float) -> None:
        """Decoding done by the task itself (conforming rows to Spark's types)."""
        self.decoding += seconds

    def read_times(self, batch_id: int, acknowledge: float) -> TaskTimes:
        """A read task's times: its waits for the cluster and its decoding."""
        return TaskTimes(batch_id, self.started, time.time(), worker_start=self.worker_start, read_wait=self.waiting,
                         decode=self.decoding, acknowledge=acknowledge)

    def sink_times(self, batch_id: int) -> TaskTimes:
        """A sink task's times: its waits for rows from upstream, and the rest of its time encoding and inserting."""
        ended = time.time()
        return TaskTimes(batch_id, self.started, ended, worker_start=self.worker_start, upstream_wait=self.waiting,
                         sink_insert=max(0.0, ended - self.started - self.waiting))


_END = object()


def _store(cluster: Cluster, path: str, name: str, value: dict[str, Any]) -> None:
    """Set attribute `name` of the phases document at `path` (made when missing); never raises."""
    try:
        try:
            cluster.set(f"{path}/@{name}", value)
        except NoSuchPathError:
            cluster.create(DOCUMENT, path, recursive=True, ignore_existing=True)
            cluster.set(f"{path}/@{name}", value)
    except ClusterError as e:
        log.warning("batch_phases_not_recorded", path=path, record=name, error=str(e))


def record_read(cluster: Cluster, tuning_path: str | None, tablet_index: int | None, times: TaskTimes) -> None:
    """Worker, at the end of a read task: store its times (the tablet's record of the batch)."""
    path = phases_path(tuning_path)
    if path is not None:
        _store(cluster, path, f"read_{tablet_index or 0}_{times.batch_id % SLOTS}", asdict(times))


def record_sink(cluster: Cluster, tuning_path: str | None, batch_id: int, tasks: list[TaskTimes],
                commit_seconds: float) -> None:
    """Sink runner, after a batch's commit: store its tasks' times and the commit's."""
    path = phases_path(tuning_path)
    if path is not None:
        _store(cluster, path, f"sink_{batch_id % SLOTS}",
               {"batch_id": batch_id, "commit": commit_seconds, "tasks": [asdict(t) for t in tasks]})


def read_batch_records(cluster: Cluster, tuning_path: str | None) -> dict[int, BatchRecords]:
    """The last `SLOTS` batches' records of a query (none when it has no phases document, or it cannot be read)."""
    path = phases_path(tuning_path)
    if path is None:
        return {}
    try:
        attributes = cluster.get(f"{path}/@") if cluster.exists(path) else {}
    except ClusterError as e:
        log.warning("batch_phases_unreadable", path=path, error=str(e))
        return {}
    return batch_records(attributes if isinstance(attributes, Mapping) else {})
