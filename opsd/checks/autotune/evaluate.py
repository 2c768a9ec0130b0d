"""Evaluate a query's facts for the auto-tuner. Pure: no cluster, no Spark, no clock.

- the target batch duration: `target_share` of the trigger interval, else `target_batch_seconds`;
- the batch-duration-versus-size relation over the recent batches, duration = intercept + slope x rows of the
  largest partition, fitted by least squares when the sizes differ enough, else through the origin from the
  batches' mean rate (with a fixed cost per batch this errs toward the measured size: it raises and cuts less
  than the true relation would, and the batches at the new size give the fit). The fixed point of Das et al.
  ("Adaptive Stream Processing using Dynamic Batch Sizing") is the size whose fitted duration meets the target;
- whether the cap binds (the newest batch read its largest partition up to the cap: raising it reads more);
- whether the last failure is an out-of-memory failure (`opsd.observe.failures.out_of_memory`);
- what binds the batches (`binding`, from the phases check's shares, `opsd.observe.phases`): the per-batch costs
  (planning, worker start, the commit, acknowledging, the rest of Spark's trigger, and under a processing-time
  trigger the time left idle until the next tick: fewer, larger batches spread them) when together they outweigh
  each per-row phase, else the largest per-row phase (waiting for reads, decoding, the transformation, the sink's
  inserts); None until a batch was measured;
- the sink's insert calls: slow (the slowest call over `slow_call_seconds`), troubled (retries, or the last failure
  was an insert call's: `opsd.observe.failures.insert_call_failed`; a task that failed elsewhere, in the source or
  a transform, is no evidence about the rows per call), full (calls carry on average at least half the rows per
  call, so more rows per call means fewer calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsd.checks.autotune.facts import Facts
from opsd.observe.failures import insert_call_failed, out_of_memory
from opsd.observe.phases import PhaseShares
from opsd.observe.progress import BatchSummary
from streaming_core.phases import ACKNOWLEDGE, COMMIT, PHASES, PLANNING, SPARK_OTHER, WORKER_START

if TYPE_CHECKING:
    from opsd.config.models import AutotuneSettings

#: Sizes fitted by least squares must spread at least this much (largest / smallest).
MIN_SPREAD = 1.2
#: The cap binds when the newest batch's largest partition read at least this share of it.
BINDING_SHARE = 0.9
#: Insert calls are full when they carry on average at least this share of the rows per call.
FULL_SHARE = 0.5
#: The phases a batch costs whatever its rows.
PER_BATCH = (PLANNING, WORKER_START, COMMIT, ACKNOWLEDGE, SPARK_OTHER)
#: `binding` when the per-batch phases bind.
PER_BATCH_COSTS = "per_batch_costs"


def binding(phases: PhaseShares | None, trigger_interval_seconds: float | None = None) -> str | None:
    """What binds the batches (see the module docstring); None when no batch was measured. Under a processing-time
    trigger, the time the batches left their intervals idle is a per-batch cost too: the next batch starts only at
    the next tick, so fewer, larger batches spread it like the others."""
    if phases is None or phases.duration_seconds <= 0:
        return None
    per_row = {p: phases.seconds[p] for p in PHASES if p not in PER_BATCH}
    largest = max(per_row, key=lambda p: per_row[p])
    idle = max(0.0, (trigger_interval_seconds or 0.0) * phases.batches - phases.duration_seconds)
    return PER_BATCH_COSTS if sum(phases.seconds[p] for p in PER_BATCH) + idle >= per_row[largest] else largest


@dataclass(frozen=True)
class Fit:
    """duration_seconds = intercept + slope x rows (of the largest partition)."""

    intercept: float
    slope: float

    def rows_for(self, seconds: float) -> int:
        """The size whose duration is `seconds` (at least 1 row)."""
        return max(1, round((seconds - self.intercept) / self.slope))


def fit(batches: Sequence[BatchSummary]) -> Fit | None:
    """The relation over batches that read rows; None when there are none."""
    sized = [(float(b.largest_partition_rows), b.duration_seconds) for b in batches if b.largest_partition_rows]
    if not sized:
        return None
    xs, ys = [x for x, _ in sized], [y for _, y in sized]
    if len(sized) >= 2 and max(xs) >= MIN_SPREAD * min(xs):
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in sized) / sxx
        if slope > 0:
            return Fit(max(0.0, my - slope * mx), slope)
    return Fit(0.0, sum(ys) / sum(xs)) if sum(ys) > 0 else None


@dataclass(frozen=True)
class RowsEvaluation:
    target_seconds: float
    newest: BatchSummary | None
    fit: Fit | None
    #: The size whose fitted duration meets the target; None without a fit.
    ideal_rows: int | None
    binding: bool
    over_target: bool
    memory_failure: bool


@dataclass(frozen=True)
class WriteEvaluation:
    #: The statistics are of calls made with the rows per call in force now (not of an older value).
    current: bool
    slow: bool
    troubled: bool
    full: bool
    rows_per_call: float | None


@dataclass(frozen=True)
class Evaluation:
    facts: Facts
    rows: RowsEvaluation
    write: WriteEvaluation
    #: What binds the batches: `PER_BATCH_COSTS`, a per-row phase, or None (not measured).
    binding: str | None = None


def evaluate_rows(facts: Facts, settings: AutotuneSettings) -> RowsEvaluation:
    interval = facts.trigger_interval_seconds
    target = settings.target_share * interval if interval else settings.target_batch_seconds
    recent = [b for b in facts.batches if b.largest_partition_rows][-settings.history_batches:]
    newest = recent[-1] if recent else None
    relation = fit(recent)
    cap = facts.max_rows_per_partition
    return RowsEvaluation(
        target_seconds=target,
        newest=newest,
        fit=relation,
        ideal_rows=relation.rows_for(target) if relation else None,
        binding=bool(newest and cap and (newest.largest_partition_rows or 0) >= BINDING_SHARE * cap),
        over_target=bool(newest and newest.duration_seconds > target),
        memory_failure=out_of_memory(facts.failure),
    )


def evaluate_write(facts: Facts, settings: AutotuneSettings) -> WriteEvaluation:
    stats, size = facts.write, facts.dyn_batch_size
    failed_call = insert_call_failed(facts.failure)
    if stats is None or size is None or stats.calls == 0:  # no call made with the value in force: a failed one or none
        return WriteEvaluation(failed_call, False, failed_call, False, None)
    per_call = stats.rows / stats.calls
    return WriteEvaluation(
        current=stats.dyn_batch_size == size,
        slow=stats.max_call_seconds > settings.slow_call_seconds,
        troubled=stats.retries > 0 or failed_call,
        full=per_call >= FULL_SHARE * size,
        rows_per_call=per_call,
    )


def evaluate(facts: Facts, settings: AutotuneSettings) -> Evaluation:
    return Evaluation(facts, evaluate_rows(facts, settings), evaluate_write(facts, settings),
                      binding(facts.phases, facts.trigger_interval_seconds))
