"""Evaluate a query's facts for the auto-tuner. Pure: no cluster, no Spark, no clock.

- the target batch duration: `target_share` of the trigger interval, else `target_batch_seconds`; and the aim, the
  target less one spread of the batches' durations about their sizes' medians (`spread`: most batches then meet
  the target, not half);
- whether the newest point's median batch is over the target (`over_target`: one stalled batch is not);
- the batch-duration-versus-size relation around the newest batch's size (`relation`), not a line over every batch
  (costs need not be linear: a transformation whose collector works harder on larger batches, reads in steps per
  call): a batch's seconds are its per-batch costs (the per-batch phases' mean, from the phases check) plus
  variable seconds; the newest operating point (the recent batches within `POINT_WIDTH` of the newest one's size:
  medians, so one stall or noisy batch does not move it) gives the variable seconds there, and the newest other
  point how the seconds per row grow with the rows between them (the elasticity, within 0 .. `MAX_ELASTICITY`). The
  fixed point of Das et al. ("Adaptive Stream Processing using Dynamic Batch Sizing") is the size whose duration by
  that relation meets the target; the relation is exact at the newest point, so whatever its error elsewhere the
  steps end where batches meet the target, and the elasticity makes them land near it in one or two steps rather
  than creeping;
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

import math
import statistics
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

#: Batches whose sizes are within this factor of the newest one are its operating point (a cap that binds reads the
#: same rows every batch; arrivals at a steady rate differ by a few percent) ...
POINT_WIDTH = 1.05
#: ... and another point at least this far from it in size gives the elasticity.
MIN_SPREAD = 1.2
#: The elasticity is taken within 0 (seconds per row that do not fall with larger batches: a raise then errs
#: small) and this (seconds per row that grow at most as fast as the rows: variable seconds at most quadratic).
MAX_ELASTICITY = 1.0
#: Batches that share an operating point with another needed to measure the spread, and the median absolute
#: deviation of a normal distribution over its standard deviation.
SPREAD_BATCHES, MAD_TO_SIGMA = 5, 1.4826
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
class Relation:
    """A batch's seconds near its newest operating point: `fixed` + `variable` x (x / `rows`) ^ (1 + `elasticity`),
    x the rows of its largest partition."""

    #: Seconds per batch whatever its rows (the per-batch phases; 0 until the phases check measured a batch).
    fixed: float
    #: The newest operating point: the median rows and the median seconds beyond `fixed` of its batches.
    rows: float
    variable: float
    #: How the seconds per row grow with the rows, from two operating points (0: a line).
    elasticity: float
    #: The median duration of the newest point's batches, and the spread of the batches' durations about their
    #: points' (`spread`).
    duration: float = 0.0
    spread: float = 0.0

    def rows_for(self, seconds: float) -> int:
        """The size whose duration is `seconds` (at least 1 row)."""
        if seconds <= self.fixed:
            return 1
        return max(1, round(self.rows * ((seconds - self.fixed) / self.variable) ** (1 / (1 + self.elasticity))))


def point(batches: Sequence[BatchSummary]) -> tuple[float, float]:
    """An operating point of batches of about one size: their median rows and median duration."""
    return (statistics.median(b.largest_partition_rows or 0 for b in batches),
            statistics.median(b.duration_seconds for b in batches))


def spread(batches: Sequence[BatchSummary]) -> float:
    """The robust standard deviation of the batches' log durations about the median of their operating point's
    (each batch among those within `POINT_WIDTH` of its size, when there are at least two): the noise of the query's
    batches, the same whichever point is newest; 0 while fewer than `SPREAD_BATCHES` batches share a point."""
    residuals = []
    for b in batches:  # of durations over 0 (`relation`)
        same = near(batches, b.largest_partition_rows or 0)
        if len(same) >= 2:
            residuals.append(math.log(b.duration_seconds / statistics.median(x.duration_seconds for x in same)))
    if len(residuals) < SPREAD_BATCHES:
        return 0.0
    return MAD_TO_SIGMA * statistics.median(abs(r) for r in residuals)


def near(batches: Sequence[BatchSummary], rows: float) -> list[BatchSummary]:
    """The batches within `POINT_WIDTH` of `rows`."""
    return [b for b in batches if rows / POINT_WIDTH <= (b.largest_partition_rows or 0) <= rows * POINT_WIDTH]


def relation(batches: Sequence[BatchSummary], fixed: float, window: int | None = None) -> Relation | None:
    """The relation around the newest batch's size (None without a batch that read rows): the batches within
    `POINT_WIDTH` of it among the newest `window` are its operating point; the newest batch outside them (of all
    the batches: how the cost grows with the rows outlives a steady spell at one size), with those near it, the other
    point, which gives the elasticity when it is at least `MIN_SPREAD` away (else a line through the fixed cost)."""
    every = [b for b in batches if b.largest_partition_rows and b.duration_seconds > 0]
    sized = every[-window:] if window else every
    if not sized:
        return None
    here = near(sized, sized[-1].largest_partition_rows or 0)
    rows, duration = point(here)
    if duration <= fixed:  # a fixed cost measured over other batches that outweighs these: judged as a line instead
        fixed = 0.0
    elasticity = 0.0
    others = [b for b in every if b not in here and b not in near(every, rows)]
    if others:
        other_rows, other_duration = point(near(others, others[-1].largest_partition_rows or 0))
        if other_duration > fixed and abs(math.log(rows / other_rows)) >= math.log(MIN_SPREAD):
            per_row = math.log((duration - fixed) / rows) - math.log((other_duration - fixed) / other_rows)
            elasticity = min(MAX_ELASTICITY, max(0.0, per_row / math.log(rows / other_rows)))
    return Relation(fixed, rows, duration - fixed, elasticity, duration, spread(sized))


def fixed_seconds(phases: PhaseShares | None) -> float:
    """The per-batch phases' mean seconds per batch over the recent measured batches (0 when none was measured)."""
    if phases is None or phases.batches <= 0:
        return 0.0
    return sum(phases.seconds[p] for p in PER_BATCH) / phases.batches


@dataclass(frozen=True)
class RowsEvaluation:
    target_seconds: float
    newest: BatchSummary | None
    relation: Relation | None
    #: The duration aimed at: the target less one spread of the batches (most batches then meet it).
    aim_seconds: float
    #: The size whose duration by the relation is the aim; None without a relation.
    ideal_rows: int | None
    binding: bool
    #: The newest point's median batch is over the target (not one noisy or stalled batch).
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
    #: The sink's insert seconds per row of the newest batch (None: no rows inserted).
    seconds_per_row: float | None = None


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
    found = relation(facts.batches, fixed_seconds(facts.phases), settings.history_batches)
    aim = target * math.exp(-found.spread) if found else target
    cap = facts.max_rows_per_partition
    return RowsEvaluation(
        target_seconds=target,
        newest=newest,
        relation=found,
        aim_seconds=aim,
        ideal_rows=found.rows_for(aim) if found else None,
        binding=bool(newest and cap and (newest.largest_partition_rows or 0) >= BINDING_SHARE * cap),
        over_target=bool(found and found.duration > target),
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
        seconds_per_row=stats.seconds / stats.rows if stats.rows else None,
    )


def evaluate(facts: Facts, settings: AutotuneSettings) -> Evaluation:
    return Evaluation(facts, evaluate_rows(facts, settings), evaluate_write(facts, settings),
                      binding(facts.phases, facts.trigger_interval_seconds))
