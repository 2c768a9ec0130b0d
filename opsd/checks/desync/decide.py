"""Decide a heal: whether to advance a queue's consumer to the committed batch's end, and where. Pure.

A heal moves only partitions behind the committed batch's end, to that end: never past a committed batch, never
backwards, never past the queue's end. It is refused when the facts are unsafe (the checkpoint or the consumer is
past the queue's end, the checkpoint is behind the trim, the consumer ahead of it, the checkpoint does not match the
queue) and waits while a batch runs (a planned, uncommitted batch) or while a running query has rows to read (it
plans its next batch, whose start acknowledges this one by itself). The apply step checks the queue's end again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from opsd.results.desync import AHEAD_OF_QUEUE, DesyncState, HealOutcome, QueueDesync


@dataclass(frozen=True)
class HealDecision:
    """The planned outcome (`HEALED`: advance to `target`, next row per partition) and why."""

    query: str
    queue: str
    consumer: str
    outcome: HealOutcome
    committed_batch: int | None
    target: Mapping[int, int] = field(default_factory=dict)

    @property
    def heal(self) -> bool:
        return self.outcome is HealOutcome.HEALED


def decide(desync: QueueDesync) -> HealDecision:
    facts = desync.facts
    target = {p.facts.partition: p.facts.checkpoint_next for p in desync.partitions if p.difference_rows > 0}

    def decision(outcome: HealOutcome) -> HealDecision:
        return HealDecision(facts.query, facts.queue, facts.consumer, outcome, facts.committed_batch,
                            target if outcome is HealOutcome.HEALED else {})

    states = {p.state for p in desync.partitions}
    if facts.problem is not None:
        return decision(HealOutcome.MISMATCH)
    if states & AHEAD_OF_QUEUE:
        return decision(HealOutcome.AHEAD_OF_QUEUE)
    if facts.committed_batch is None:
        return decision(HealOutcome.NO_COMMITTED_BATCH)
    if DesyncState.BEHIND_TRIM in states:
        return decision(HealOutcome.BEHIND_TRIM)
    if DesyncState.CONSUMER_AHEAD in states:
        return decision(HealOutcome.CONSUMER_AHEAD)
    if not target:
        return decision(HealOutcome.NOTHING_TO_HEAL)
    if facts.planned_batch is not None:
        return decision(HealOutcome.BATCH_RUNNING)
    if not facts.query_stopped and not desync.idle:
        return decision(HealOutcome.QUERY_BUSY)
    return decision(HealOutcome.HEALED)
