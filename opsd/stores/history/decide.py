"""Decide what the history keeps. Pure: decisions in, entries out.

Kept: a tuner decision that changes a knob (applied in mode `apply`, only recommended in mode `recommend`); a heal
that moved a consumer, failed, met a conflict or was refused as unsafe (`SAFETY_REFUSALS`); a replan of a failed
run's batch and its refusal. Not kept: holds and the heal's waits (a batch runs, the query acknowledges by itself,
nothing to heal): they repeat at every run and explain nothing a kept entry does not.

An entry equal to the last one kept for the same query, kind and subject (outcome, reason, before, after) is
dropped (`novel`): a standing refusal or recommendation is kept once, not every few seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from opsd.results.autotune import Direction, ReplanRefusal, TunerDecision, TuneReason
from opsd.results.desync import HealOutcome, QueueDesync
from opsd.results.history import HistoryEntry, HistoryKind, HistoryOutcome

#: Heal outcomes kept: an advance made, tried and lost or failed, or refused because the facts are unsafe.
SAFETY_REFUSALS = frozenset({HealOutcome.NO_COMMITTED_BATCH, HealOutcome.MISMATCH, HealOutcome.AHEAD_OF_QUEUE,
                             HealOutcome.BEHIND_TRIM, HealOutcome.CONSUMER_AHEAD})
KEPT_HEALS = SAFETY_REFUSALS | {HealOutcome.HEALED, HealOutcome.CONFLICT, HealOutcome.FAILED}


def tuner_entries(decisions: Sequence[TunerDecision], at: float) -> list[HistoryEntry]:
    """The tuner's decisions that change a knob (or would, in mode `recommend`)."""
    return [HistoryEntry(t.decision.query, at, HistoryKind.TUNER, t.decision.knob,
                         HistoryOutcome.APPLIED if t.applied else HistoryOutcome.RECOMMENDED, t.decision.reason,
                         t.decision.current, t.decision.recommended,
                         {**t.decision.inputs, "mode": t.mode.value, "bounds": t.bounds})
            for t in decisions if t.decision.direction != Direction.HOLD]


def heal_entries(desync: QueueDesync, outcome: HealOutcome, moves: Mapping[int, tuple[int, int]],
                 at: float) -> list[HistoryEntry]:
    """A heal worth keeping (its outcome and the moves made, `{partition: (old, new)}`): made, failed, lost to a
    conflict, or refused as unsafe."""
    if outcome not in KEPT_HEALS:
        return []
    f = desync.facts
    offsets = {str(p.facts.partition): p.facts.consumer_offset for p in desync.partitions}
    after = {**offsets, **{str(p): new for p, (_, new) in moves.items()}} if moves else None
    inputs = {"consumer": f.consumer, "committed_batch": f.committed_batch, "planned_batch": f.planned_batch,
              "states": {str(p.facts.partition): p.state.value for p in desync.partitions},
              "checkpoint_next": {str(p.facts.partition): p.facts.checkpoint_next for p in desync.partitions},
              "problem": f.problem}
    return [HistoryEntry(f.query, at, HistoryKind.HEAL, f.queue, outcome, outcome,
                         offsets, after, inputs)]


def replan_entries(query: str, batch_id: int, refused: ReplanRefusal | None, cap: int | None,
                   partition_rows: int | None, at: float) -> list[HistoryEntry]:
    """A failed run's batch planned again under `cap`, or left to replay with its range (`refused`: why)."""
    outcome, reason = ((HistoryOutcome.REFUSED, refused) if refused
                       else (HistoryOutcome.REPLANNED, TuneReason.MEMORY_FAILURE))
    inputs = {"batch_id": batch_id, "max_rows_per_partition": cap}
    return [HistoryEntry(query, at, HistoryKind.REPLAN, f"batch {batch_id}", outcome, reason,
                         {"partition_rows": partition_rows}, None if refused else {"partition_rows": cap}, inputs)]


@dataclass(frozen=True)
class HistoryMemory:
    """The last entry kept per (query, kind, subject), as (outcome, reason, before, after)."""

    last: Mapping[tuple[str, str, str], tuple[object, ...]] = field(default_factory=dict)


def _identity(entry: HistoryEntry) -> tuple[tuple[str, str, str], tuple[object, ...]]:
    return (entry.query, entry.kind.value, entry.subject), (entry.outcome, entry.reason, entry.before, entry.after)


def novel(entries: Sequence[HistoryEntry], memory: HistoryMemory) -> list[HistoryEntry]:
    """The entries that differ from the last one kept for their query, kind and subject."""
    return [e for e in entries if memory.last.get(_identity(e)[0]) != _identity(e)[1]]


def remember(memory: HistoryMemory, kept: Sequence[HistoryEntry]) -> HistoryMemory:
    """The memory once `kept` are in the table."""
    return HistoryMemory({**memory.last, **dict(map(_identity, kept))})
