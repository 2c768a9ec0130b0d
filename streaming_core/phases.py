"""Where a micro-batch's time goes: the parts of a batch measured where they happen, stored for opsd.

The parts (`PHASES`): planning the batch (offsets, admission, the tuning document), starting Python workers, waiting
for the cluster in reads, decoding rows, the user's transformation, encoding and inserting in the sink, the sink's
commit, acknowledging (the consumer advance) and the rest of Spark's trigger. opsd puts them together per batch
(`opsd.observe.phases`): Spark's progress gives the trigger's own durations, these records the rest.

Who measures what, and how it travels (the processes of the architecture):
- the source's runner times its `commit` (acknowledging, which Spark calls while planning the next batch) and hands
  it to the batch's first read task inside the planned partition (planning is Spark's own `latestOffset`,
  `getBatch` and `queryPlanning` durations, which hold the source's control calls);
- each read task (a Spark Python worker) times its worker's start (the process's age at its first task), its waits
  for the cluster's read calls and its decoding (`streaming_core.cluster.timing.DECODE`, and conforming to Spark's
  types), and stores them with the runner's part as one attribute `@read_<tablet>_<slot>` of the query's phases
  document;
- each sink task times its worker's start and its waits for rows from upstream (the source and the transformation);
  the rest of its time is encoding and inserting; it returns them in its commit message, and the sink's commit
  stores them with the commit's own time as one attribute `@sink_<slot>`.
A task knows its batch from Spark's local property `streaming.sql.batchId`; `slot` is the batch id modulo `SLOTS`,
so the document holds the last `SLOTS` batches without ever growing. A record that cannot be stored is logged,
never raised: measuring must not fail a batch. Each task adds one attribute write per batch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from pyspark import TaskContext

from .cluster import Cluster, ClusterError, NoSuchPathError
from .cluster.base import DOCUMENT
from .cluster.timing import DECODE
from .log import get_logger

log = get_logger(__name__)
T = TypeVar("T")

PLANNING = "planning"
WORKER_START = "worker_start"
READ_WAIT = "read_wait"
DECODE_ROWS = "decode"
TRANSFORM = "transform"
SINK_INSERT = "sink_insert"
COMMIT = "commit"
ACKNOWLEDGE = "acknowledge"
SPARK_OTHER = "spark_other"
#: Every part of a batch, in the order a batch goes through them (the `phase` label's values).
PHASES = (PLANNING, WORKER_START, READ_WAIT, DECODE_ROWS, TRANSFORM, SINK_INSERT, COMMIT, ACKNOWLEDGE, SPARK_OTHER)
#: What each part is, in words ("72% of batch time waiting for the cluster's reads").
WORDS = {
    PLANNING: "planning (offsets, admission, the tuning document, Spark's plan)",
    WORKER_START: "starting Python workers",
    READ_WAIT: "waiting for the cluster's reads",
    DECODE_ROWS: "decoding rows",
    TRANSFORM: "in the transformation (and Spark moving rows between workers)",
    SINK_INSERT: "encoding and inserting into the sink",
    COMMIT: "committing the sink's batch",
    ACKNOWLEDGE: "acknowledging (the consumer advance)",
    SPARK_OTHER: "in the rest of Spark's trigger (its logs, job scheduling)",
}
#: Batches a phases document keeps (each writer's attribute is reused every `SLOTS` batches).
SLOTS = 16
#: The local property Spark sets on a micro-batch's jobs: its batch id, which every task of the batch sees.
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def phases_path(tuning_path: str | None) -> str | None:
    """A query's phases document: next to the tuning document both its source and its sink read."""
    return f"{tuning_path}_phases" if tuning_path else None


@dataclass(frozen=True)
class TaskTimes:
    """Seconds one task spent in each part it measures, and when it ran (unix seconds)."""

    batch_id: int
    started: float
    ended: float
    worker_start: float = 0.0
    read_wait: float = 0.0
    decode: float = 0.0
    #: a sink task's waits for its next rows (the source's read and the transformation upstream of it).
    upstream_wait: float = 0.0
    sink_insert: float = 0.0
    #: the source runner's acknowledging (consumer advance) while this batch was planned (its first read task only).
    acknowledge: float = 0.0

    @property
    def wall(self) -> float:
        return max(0.0, self.ended - self.started)

    @classmethod
    def from_document(cls, value: object) -> TaskTimes | None:
        """A stored record, None when it is not one (a damaged document never fails opsd)."""
        if not isinstance(value, Mapping):
            return None
        known = {f.name: value[f.name] for f in fields(cls) if f.name in value}
        try:
            times = cls(**known)
        except TypeError:
            return None
        numbers = [getattr(times, f.name) for f in fields(cls)]
        ok = isinstance(times.batch_id, int) and all(isinstance(v, int | float) and v >= 0 for v in numbers)
        return times if ok else None


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


@dataclass(frozen=True)
class BatchRecords:
    """What the tasks and the sink's commit of one batch stored."""

    batch_id: int
    reads: tuple[TaskTimes, ...] = ()
    sinks: tuple[TaskTimes, ...] = ()
    #: the sink's commit (None: no yt sink recorded this batch).
    commit: float | None = None


def batch_records(attributes: Mapping[str, Any]) -> dict[int, BatchRecords]:
    """The records of a phases document's attributes, by batch id (other attributes and damaged records ignored)."""
    reads: dict[int, list[TaskTimes]] = {}
    sinks: dict[int, tuple[tuple[TaskTimes, ...], float]] = {}
    for name, value in attributes.items():
        if name.startswith("read_"):
            times = TaskTimes.from_document(value)
            if times is not None:
                reads.setdefault(times.batch_id, []).append(times)
        elif name.startswith("sink_") and isinstance(value, Mapping):
            batch_id, commit, tasks = value.get("batch_id"), value.get("commit"), value.get("tasks")
            parsed = [TaskTimes.from_document(t) for t in tasks] if isinstance(tasks, list) else [None]
            if isinstance(batch_id, int) and isinstance(commit, int | float) and None not in parsed:
                sinks[batch_id] = (tuple(t for t in parsed if t is not None), float(commit))
    return {b: BatchRecords(b, tuple(sorted(reads.get(b, ()), key=lambda t: t.started)),
                            *sinks.get(b, ((), None)))
            for b in reads.keys() | sinks.keys()}


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
