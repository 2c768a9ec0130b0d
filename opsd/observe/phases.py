"""Where each batch's time went: a batch's progress (Spark's own durations) and the parts its tasks and commits
measured (`streaming_core.phases`) put together into the phases of `streaming_core.phases.PHASES`, which add up to the
batch's duration (Spark's `triggerExecution`). All functions are pure.

How the parts fill the batch's duration:
- planning: Spark's `latestOffset` + `getBatch` + `queryPlanning` (the source's control calls run inside them);
- acknowledging: the source runner's consumer advance (it runs inside Spark's `walCommit`, so it is taken out of it);
- commit: the sink's commit (inside Spark's `addBatch`);
- the tasks' parts (worker start, waits for the cluster's reads, decoding, the transformation, the sink's inserts) are
  summed over the batch's tasks, which run side by side: they are scaled to the time the tasks ran (from the first
  worker's start to the last task's end). The transformation is what the sink's tasks waited for upstream beyond the
  read tasks' own parts (without a `yt` sink: the read tasks' time suspended while Spark took their rows downstream);
- the rest of Spark's trigger: the trigger's duration less all the above: Spark's own durations outside planning and
  `addBatch` (its offset and commit logs) and, inside `addBatch`, its time outside the tasks' span and the commit
  (`scheduling_seconds`: the job's scheduling, its tasks' launch).
`measured_seconds` is what timers measured: ours, Spark's own durations, and `addBatch` less the tasks' span and the
commit (two measured clocks); `coverage` its share of the duration. The parts add up to the duration by construction;
a coverage under 1 is time nobody measured, over 1 parts that overrun their container (tasks that ran longer than
`addBatch`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from opsd.observe.progress import BatchSummary, frozen_mapping
from streaming_core.phases import (
    ACKNOWLEDGE,
    COMMIT,
    DECODE_ROWS,
    PHASES,
    PLANNING,
    READ_WAIT,
    SINK_INSERT,
    SPARK_OTHER,
    TRANSFORM,
    WORDS,
    WORKER_START,
    BatchRecords,
)

#: Spark's durations (`durationMs` keys) that plan a batch.
PLANNING_DURATIONS = ("latestOffset", "getOffset", "setOffsetRange", "getEndOffset", "getBatch", "queryPlanning")
#: Spark's durations that are the whole trigger, or hold the batch's tasks and commit.
WHOLE_TRIGGER, EXECUTION = "triggerExecution", "addBatch"


@dataclass(frozen=True)
class BatchPhases:
    """One batch's seconds in each phase (they add up to `duration_seconds`)."""

    batch_id: int
    duration_seconds: float
    seconds: Mapping[str, float]
    measured_seconds: float
    #: of `spark_other`, Spark's time inside `addBatch` outside the tasks' span and the commit (scheduling the job,
    #: launching its tasks, handing them to Python workers).
    scheduling_seconds: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "seconds", frozen_mapping(self.seconds))

    @property
    def coverage(self) -> float:
        return self.measured_seconds / self.duration_seconds if self.duration_seconds else 0.0


def batch_phases(batch: BatchSummary, records: BatchRecords | None) -> BatchPhases | None:
    """The phases of one batch, None when Spark reported no duration or nothing of the batch was recorded."""
    durations = batch.durations_seconds
    trigger = durations.get(WHOLE_TRIGGER) or 0.0
    if trigger <= 0 or records is None or not (records.reads or records.sinks):
        return None
    planning = sum(durations.get(k, 0.0) for k in PLANNING_DURATIONS)
    acknowledge = sum(t.acknowledge for t in records.reads)
    spark_own = max(0.0, sum(v for k, v in durations.items()
                             if k not in (*PLANNING_DURATIONS, WHOLE_TRIGGER, EXECUTION)) - acknowledge)
    commit = records.commit or 0.0
    tasks = _task_parts(records)
    summed = sum(tasks.values())
    every = (*records.reads, *records.sinks)
    ran = max(t.ended for t in every) - min(t.started - t.worker_start for t in every)
    executor = min(summed, ran)
    room = max(0.0, durations.get(EXECUTION, trigger) - commit)
    scheduling = max(0.0, room - executor) if EXECUTION in durations else 0.0
    shown = min(executor, room)  # an overrun shows in the coverage; the parts still add up to the duration
    seconds = {PLANNING: planning, ACKNOWLEDGE: acknowledge, COMMIT: commit,
               **{phase: s * shown / summed if summed else 0.0 for phase, s in tasks.items()}}
    seconds[SPARK_OTHER] = max(0.0, trigger - sum(seconds.values()))
    measured = planning + acknowledge + commit + executor + scheduling + spark_own
    return BatchPhases(batch.batch_id, trigger, {p: seconds.get(p, 0.0) for p in PHASES}, measured, scheduling)


def _task_parts(records: BatchRecords) -> dict[str, float]:
    reads, sinks = records.reads, records.sinks
    read_work = sum(t.read_wait + t.decode + t.worker_start for t in reads)
    waited = sum(t.upstream_wait for t in sinks) if sinks else sum(t.wall for t in reads)
    return {WORKER_START: sum(t.worker_start for t in (*reads, *sinks)),
            READ_WAIT: sum(t.read_wait for t in reads), DECODE_ROWS: sum(t.decode for t in reads),
            TRANSFORM: max(0.0, waited - read_work), SINK_INSERT: sum(t.sink_insert for t in sinks)}


@dataclass(frozen=True)
class PhaseShares:
    """Where a query's recent measured batches spent their time: summed seconds and shares per phase, the largest
    phase in words ("72% of batch time waiting for the cluster's reads"); what `/status` and the doctor show and the
    auto-tuner reads."""

    run_id: str | None
    batches: int
    last_batch_id: int
    duration_seconds: float
    seconds: Mapping[str, float]
    shares: Mapping[str, float]
    largest: str
    coverage: float
    words: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "seconds", frozen_mapping(self.seconds))
        object.__setattr__(self, "shares", frozen_mapping(self.shares))


def shares_of(measured: Iterable[BatchPhases], run_id: str | None = None) -> PhaseShares | None:
    """The shares of the batches' summed time (None for no batches)."""
    batches = list(measured)
    total = sum(b.duration_seconds for b in batches)
    if not batches or total <= 0:
        return None
    seconds = {p: sum(b.seconds[p] for b in batches) for p in PHASES}
    shares = {p: s / total for p, s in seconds.items()}
    largest = max(PHASES, key=lambda p: seconds[p])
    return PhaseShares(run_id, len(batches), max(b.batch_id for b in batches), total, seconds, shares, largest,
                       sum(b.measured_seconds for b in batches) / total, f"{shares[largest]:.0%} of batch time "
                       f"{WORDS[largest]}")
