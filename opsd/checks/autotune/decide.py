"""Decide the auto-tuner's values. Pure: the evaluation, the tuner's memory of earlier decisions and the settings
in, decisions out.

Rows for time, bytes for memory. A row cap is safe for memory only at the width of the rows it was judged on; rows
that grow 10x wide make it 10x too large before the OOM check has seen one of them. The byte cap
(`max_bytes_per_partition`, which the source applies at planning time, `streaming_core.admission`) holds whatever the
width, so with `byte_cap` on (the default) memory is guarded in bytes and the row cap follows the batch duration.

`max_bytes_per_partition` (with `byte_cap`), first rule that applies:
1. the query failed of memory (a failure not handled before): cut at once to `memory_cut` x the byte cap (or x the
   OOM check's safe byte cap when there is none), to the safe byte cap if smaller, and remember the failed size as a
   ceiling never to be reached again;
2. the OOM check has no safe byte cap yet: hold;
3. no byte cap in force, or one over the safe byte cap: set it to the safe byte cap at once;
4. a safe byte cap more than `hysteresis` above the byte cap (the batches measured left room): raise toward it, at
   most `max_step_up` x, below the memory ceiling;
5. else hold. All within `min_bytes_per_partition` .. `max_bytes_per_partition`.

`max_rows_per_partition`, first rule that applies (with a byte cap in force, rules 2 and 4 and the safe cap's bound
on raises are the byte cap's business and left out):
1. the query failed of memory (a failure not handled before): cut at once to `memory_cut` x the largest batch's
   rows per partition (or x the cap), and remember that size as a ceiling never to be reached again;
2. OOM risk at or over the threshold: cut at once to `memory_cut` x the cap (to the safe cap if smaller), once per
   completed batch (until a batch completes after a cut, the risk is still that of the batch planned before it);
3. no cap in force: set one at once (the safe cap, else `start_rows_per_partition`), so that a first batch after
   a start or an outage cannot swallow the backlog; without a memory model (no OOM verdict, no byte cap) and no
   batch measured yet, a cap over `start_rows_per_partition` is cut to it for the same reason: the cap then grows
   as the batches allow rather than starting large;
4. the cap is over the OOM check's safe cap: cut to it;
5. stabilising: fewer than `stabilisation_batches` batches planned after the last change have completed — the
   batch planned before a change replays with its old range, so the first batch counted is the second one after
   the newest batch seen at the change; one is enough when the fixed point is at least a step above the cap (the
   raise is bounded by the step, not judged finely: bigger steps early, careful ones near the optimum);
6. the fixed point (see `evaluate`: the size whose duration is the aim, one spread under the target), with bounded
   steps: a raise only while the cap binds, a backlog waits, the per-batch costs are what binds the batches (or no
   batch was measured: a larger batch costs as much per row when reads, decoding, the transformation or the inserts
   bind, and the reason names that phase) and the risk is under the threshold, in the fewest equal steps of at most
   `max_step_up` x (`max_step_up_unknown_risk` x while the risk is unknown) so that the last lands on the fixed
   point, never over the safe cap, the memory ceiling or the upper bound, and not within `hysteresis` of the cap;
   a cut only while the newest size's median batch is over the target, to the fixed point but at least
   `max_step_down` x the rows the newest batch read (a cap above them binds nothing). The aim's margin under the
   target is the cuts' hysteresis: a cap whose batches meet the aim is neither raised nor cut, so no oscillation at
   a steady rate.

A failed run's planned batch (`decide_replan`, only before the runner restarts the query): after a memory failure,
the batch the run left planned and uncommitted is planned again under the cut cap when the facts show that is safe;
else it replays with its range (Spark's rule), and the refusal says why.

`dyn_batch_size`, judged once per batch and only on calls made with the value in force: halve on retries, a failed
insert call or a call slower than `slow_call_seconds` (not when waiting for the cluster's reads binds the batches:
the proxy is slow for every call), and remember that size as costing without bound; hold when tasks failed
elsewhere (the source, a transform: no evidence about rows per call) or calls were not full; else the bounded search
of `call_size` over the insert seconds per row measured at each size tried, trying another size only where the
sink's inserts bind the batches (or no batch was measured) and a larger one only while calls are fast; never above
the rows-per-transaction limit (`Facts.dyn_batch_size_ceiling`, from `streaming_core.tuning.dyn_batch_size_in_force`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from opsd.checks.autotune import call_size
from opsd.checks.autotune.call_size import CallSample
from opsd.checks.autotune.evaluate import PER_BATCH_COSTS, Evaluation
from opsd.checks.autotune.facts import Facts
from opsd.results.autotune import Decision, Direction, Knob, ReplanRefusal, TuneReason
from streaming_core.phases import DECODE_ROWS, READ_WAIT, SINK_INSERT, TRANSFORM

if TYPE_CHECKING:
    from opsd.config.models import AutotuneSettings

#: Why a knob holds when what binds the batches (`evaluate.binding`) is not its own.
BINDS = {PER_BATCH_COSTS: TuneReason.BATCH_COSTS_BIND, READ_WAIT: TuneReason.READS_BIND,
         DECODE_ROWS: TuneReason.DECODE_BINDS, TRANSFORM: TuneReason.TRANSFORM_BINDS,
         SINK_INSERT: TuneReason.INSERTS_BIND}


@dataclass(frozen=True)
class TunerMemory:
    """What the tuner remembers of one query between runs."""

    #: The newest batch id seen when the cap was last changed (None: never changed).
    rows_changed_after: int | None = None
    #: A cap at which a batch failed of memory: raises stay below it.
    rows_ceiling: int | None = None
    #: The failed run already acted on (a failure is cut for once).
    handled_failure: str | None = None
    #: The batch whose write statistics were last judged.
    judged_write_batch: int | None = None
    #: A byte cap at which a batch failed of memory: raises stay below it.
    bytes_ceiling: int | None = None
    #: The insert seconds per row measured at each rows per call tried (`call_size`).
    call_samples: tuple[CallSample, ...] = ()


def failed_size(facts: Facts) -> int | None:
    """The rows per partition a memory failure happened at: the cap, or the largest recent batch when that is
    smaller (None when neither is known)."""
    largest = max((b.largest_partition_rows or 0 for b in facts.batches), default=0)
    known = [x for x in (facts.max_rows_per_partition, largest) if x]
    return min(known) if known else None


def _clamp(value: float, low: int, high: int) -> int:
    return max(low, min(high, int(value)))


def equal_step(cap: int, ideal: int, step: float) -> float:
    """The first of the fewest equal raises from `cap` to `ideal` of at most `step` x each: the last one lands on the
    ideal instead of short of it by less than the hysteresis, where it would stay."""
    raises = math.ceil(math.log(ideal / cap) / math.log(step) - 1e-9)
    return cap * (ideal / cap) ** (1 / raises)


def decide_rows(evaluation: Evaluation, memory: TunerMemory, settings: AutotuneSettings) -> Decision:
    facts, rows = evaluation.facts, evaluation.rows
    cap, risk, safe = facts.max_rows_per_partition, facts.oom_risk, facts.safe_max_rows_per_partition
    newest = rows.newest
    inputs = {"batch_id": newest and newest.batch_id, "partition_rows": newest and newest.largest_partition_rows,
              "duration_seconds": newest and newest.duration_seconds,
              "phases_seconds": dict(newest.durations_seconds) if newest else None,
              "target_seconds": rows.target_seconds, "aim_seconds": rows.aim_seconds, "ideal_rows": rows.ideal_rows,
              "binding": rows.binding,
              "backlog_rows": facts.backlog_rows, "binding_phase": evaluation.binding,
              "time_to_drain_seconds": facts.time_to_drain_seconds, "oom_risk": risk, "safe_cap": safe}
    low, high = settings.min_rows_per_partition, settings.max_rows_per_partition
    byte_guard = facts.max_bytes_per_partition is not None  # it guards memory: the risk and the safe cap are its
    if byte_guard:
        safe = None
    if safe is not None:
        high = max(low, min(high, safe))

    def to(value: float | None, reason: TuneReason) -> Decision:
        return Decision(facts.query, Knob.MAX_ROWS, cap, cap if value is None else _clamp(value, low, high), reason,
                        inputs)

    if rows.memory_failure and facts.failed_run != memory.handled_failure:
        return to((failed_size(facts) or settings.start_rows_per_partition) * settings.memory_cut,
                  TuneReason.MEMORY_FAILURE)
    changed = memory.rows_changed_after
    if risk is not None and risk >= settings.risk_threshold and cap is not None and not byte_guard:
        if changed is not None and (newest is None or newest.batch_id <= changed):
            # Cut already, and no batch since: the risk is still the planned batch's.
            return to(None, TuneReason.STABILISING)
        return to(min(cap * settings.memory_cut, safe or cap), TuneReason.OOM_RISK)
    if cap is None:
        return to(safe or settings.start_rows_per_partition, TuneReason.FIRST_BATCH_SAFE)
    if risk is None and not byte_guard and not facts.batches and cap > settings.start_rows_per_partition:
        return to(settings.start_rows_per_partition, TuneReason.START_UNKNOWN_RISK)
    if safe is not None and cap > safe:
        return to(safe, TuneReason.SAFE_CAP)
    if newest is None:
        return to(None, TuneReason.NO_BATCHES)
    settled = [b for b in facts.batches if changed is None or b.batch_id > changed + 1]
    step = settings.max_step_up if risk is not None else settings.max_step_up_unknown_risk
    # Far under the fixed point a raise is bounded by the step, not judged finely: one batch at the cap will do.
    far = bool(settled) and rows.ideal_rows is not None and rows.ideal_rows >= cap * step
    if len(settled) < (settings.stabilisation_batches if changed is not None else 1) and not far:
        return to(None, TuneReason.STABILISING)
    if rows.ideal_rows is None:
        return to(None, TuneReason.NO_BATCHES)
    if rows.ideal_rows > cap * (1 + settings.hysteresis):
        if not rows.binding:
            return to(None, TuneReason.CAP_NOT_BINDING)
        if not facts.backlog_rows:
            return to(None, TuneReason.NO_BACKLOG)
        if risk is not None and risk >= settings.risk_threshold:
            return to(None, TuneReason.OOM_RISK)
        if evaluation.binding not in (None, PER_BATCH_COSTS):  # larger batches cost as much per row
            return to(None, BINDS[evaluation.binding])
        target = equal_step(cap, rows.ideal_rows, step)
        if memory.rows_ceiling is not None:
            target = min(target, memory.rows_ceiling * settings.memory_cut)
        return to(max(cap, target), TuneReason.FAST_BATCHES if evaluation.binding is None
                  else TuneReason.PER_BATCH_COSTS_BIND)
    if rows.over_target and rows.ideal_rows < cap:  # the aim's margin under the target is the hysteresis of cuts
        read = min(cap, newest.largest_partition_rows or cap)  # a cap over what the batch read binds nothing
        return to(max(rows.ideal_rows, read * settings.max_step_down), TuneReason.SLOW_BATCHES)
    return to(None, TuneReason.WITHIN_TARGET)


def decide_bytes(evaluation: Evaluation, memory: TunerMemory, settings: AutotuneSettings) -> Decision:
    facts = evaluation.facts
    cap, safe, risk = facts.max_bytes_per_partition, facts.safe_max_bytes_per_partition, facts.oom_risk
    inputs = {"safe_bytes": safe, "oom_risk": risk, "bytes_ceiling": memory.bytes_ceiling,
              "safe_rows": facts.safe_max_rows_per_partition}
    low, high = settings.min_bytes_per_partition, settings.max_bytes_per_partition

    def to(value: float | None, reason: TuneReason) -> Decision:
        return Decision(facts.query, Knob.MAX_BYTES, cap, cap if value is None else _clamp(value, low, high), reason,
                        inputs)

    if evaluation.rows.memory_failure and facts.failed_run != memory.handled_failure and (cap or safe):
        return to(min((cap or safe) * settings.memory_cut, safe or cap), TuneReason.MEMORY_FAILURE)
    if safe is None:
        return to(None, TuneReason.NO_MEMORY_MODEL)
    if memory.bytes_ceiling is not None:
        safe = min(safe, int(memory.bytes_ceiling * settings.memory_cut))
    if cap is None:
        return to(safe, TuneReason.MEMORY_BOUND)
    if cap > safe:
        return to(safe, TuneReason.SAFE_CAP)
    if safe > cap * (1 + settings.hysteresis):
        return to(min(safe, cap * settings.max_step_up), TuneReason.MEMORY_HEADROOM)
    return to(None, TuneReason.WITHIN_SAFE_CAP)


def write_sample(evaluation: Evaluation, memory: TunerMemory) -> CallSample | None:
    """What the newest batch's insert calls say about the size in force (None: nothing new, or no evidence): its
    insert seconds per row when its calls were full, an unbounded cost when they failed, retried or were slow."""
    facts, write = evaluation.facts, evaluation.write
    stats, size = facts.write, facts.dyn_batch_size
    if size is None or stats is None or stats.batch_id is None or stats.batch_id == memory.judged_write_batch:
        return None
    if not write.current:
        return None
    if write.troubled or write.slow:
        return CallSample(stats.batch_id, size, math.inf)
    if stats.errors or not write.full or write.seconds_per_row is None:
        return None
    return CallSample(stats.batch_id, size, write.seconds_per_row)


def decide_write(evaluation: Evaluation, memory: TunerMemory, settings: AutotuneSettings) -> Decision:
    facts, write = evaluation.facts, evaluation.write
    size, stats = facts.dyn_batch_size, facts.write
    high = facts.dyn_batch_size_ceiling or settings.max_dyn_batch_size
    low = min(settings.min_dyn_batch_size, high)
    sample = write_sample(evaluation, memory)
    cost = call_size.costs(call_size.kept((*memory.call_samples, sample), sample.batch_id) if sample else ())
    finite = {k: v for k, v in cost.items() if math.isfinite(v)}
    inputs = {"batch_id": stats and stats.batch_id, "calls": stats and stats.calls, "rows": stats and stats.rows,
              "seconds": stats and stats.seconds, "max_call_seconds": stats and stats.max_call_seconds,
              "retries": stats and stats.retries, "errors": stats and stats.errors,
              "rows_per_call": write.rows_per_call, "binding_phase": evaluation.binding,
              "seconds_per_row": write.seconds_per_row,
              "seconds_per_row_by_size": {str(k): v for k, v in sorted(finite.items())}}
    measured = evaluation.binding is not None

    def to(value: float | None, reason: TuneReason) -> Decision:
        if value is None or size is None:
            return Decision(facts.query, Knob.DYN_BATCH_SIZE, size, size, reason, inputs)
        return Decision(facts.query, Knob.DYN_BATCH_SIZE, size, _clamp(value, low, high), reason, inputs)

    if size is None or stats is None or stats.batch_id == memory.judged_write_batch or not write.current:
        return to(None, TuneReason.NO_NEW_WRITES)
    if write.troubled:
        return to(size * 0.5, TuneReason.FAILED_CALLS)
    if write.slow:
        if evaluation.binding == READ_WAIT:  # the proxy is slow for every call: fewer rows per insert do not help
            return to(None, TuneReason.READS_BIND)
        return to(size * 0.5, TuneReason.SLOW_CALLS_INSERTS_BIND if measured else TuneReason.SLOW_CALLS)
    if stats.errors:  # tasks failed, not in an insert call (that would be troubled): no evidence either way
        return to(None, TuneReason.TASKS_FAILED_ELSEWHERE)
    if not write.full:
        return to(None, TuneReason.CALLS_NOT_FULL)
    value, step = call_size.next_size(cost, low, high, settings.dyn_batch_size_step_up, settings.hysteresis)
    if step == call_size.Step.SETTLED:
        return to(value, TuneReason.CALL_SIZE_SETTLED if value == size else TuneReason.CALL_SIZE_BEST)
    if measured and evaluation.binding != SINK_INSERT:  # another size only helps where the inserts bind
        return to(None, BINDS[evaluation.binding])
    if step == call_size.Step.LARGER and stats.max_call_seconds * 2 > settings.slow_call_seconds:
        return to(None, TuneReason.CALLS_NEAR_SLOW)
    return to(value, TuneReason.CALL_SIZE_TRIED_INSERTS_BIND if measured else TuneReason.CALL_SIZE_TRIED)


@dataclass(frozen=True)
class Replan:
    """Plan a failed run's uncommitted batch again (`refused` None) or let it replay with its range (why)."""

    query: str
    batch_id: int
    refused: ReplanRefusal | None


def decide_replan(evaluation: Evaluation, cap: int | None) -> Replan | None:
    """For a query about to restart after a memory failure that left a batch planned: whether to plan it again
    (`cap`: the cap in force once this run's decisions are applied). None when planning it again would not make
    it smaller: no cap, or a batch whose largest partition is within the cap (or unknown)."""
    facts = evaluation.facts
    planned = facts.uncommitted
    if not evaluation.rows.memory_failure or planned is None or not facts.reads_queue:
        return None
    if cap is None or planned.partition_rows is None or planned.partition_rows <= cap:
        return None
    return Replan(facts.query, planned.batch_id, planned.unsafe)


def decide(evaluation: Evaluation, memory: TunerMemory, settings: AutotuneSettings) -> tuple[Decision, ...]:
    """The decisions for the query's knobs (a knob the query does not have is left out)."""
    facts = evaluation.facts
    found = []
    if facts.reads_queue:
        found.append(decide_rows(evaluation, memory, settings))
        if settings.byte_cap:
            found.append(decide_bytes(evaluation, memory, settings))
    if facts.dyn_batch_size is not None:
        found.append(decide_write(evaluation, memory, settings))
    return tuple(found)


def remember(memory: TunerMemory, decisions: tuple[Decision, ...], evaluation: Evaluation,
             applied: bool) -> TunerMemory:
    """The memory after the decisions (`applied`: their values were written)."""
    facts = evaluation.facts
    newest = max((b.batch_id for b in facts.batches), default=None)
    for d in decisions:
        if d.knob == Knob.MAX_ROWS and d.reason == TuneReason.MEMORY_FAILURE:
            known = [x for x in (failed_size(facts), memory.rows_ceiling) if x]
            memory = replace(memory, handled_failure=facts.failed_run, rows_ceiling=min(known) if known else None)
        if d.knob == Knob.MAX_BYTES and d.reason == TuneReason.MEMORY_FAILURE:
            known = [x for x in (d.current or facts.safe_max_bytes_per_partition, memory.bytes_ceiling) if x]
            memory = replace(memory, handled_failure=facts.failed_run, bytes_ceiling=min(known) if known else None)
        if d.knob == Knob.MAX_ROWS and applied and d.direction != Direction.HOLD:
            memory = replace(memory, rows_changed_after=newest if newest is not None else -2)
        if d.knob == Knob.DYN_BATCH_SIZE and facts.write is not None:
            sample = write_sample(evaluation, memory)
            if sample is not None:
                memory = replace(memory, call_samples=call_size.kept((*memory.call_samples, sample),
                                                                     sample.batch_id))
            memory = replace(memory, judged_write_batch=facts.write.batch_id)
    return memory
