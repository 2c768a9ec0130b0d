"""Where a micro-batch's time goes: the parts of a batch, measured where they happen and stored for opsd (the
measuring and storing: `streaming_core.phase_timing`; this module is pure, so opsd's pure steps read it).

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

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

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
PHASES = (PLANNING, WORKER_START, READ_WAIT, DECODE_ROWS, TRANSFORM, SINK_INSERT, COMMIT, ACKNOWLEDGE,
          SPARK_OTHER)
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
