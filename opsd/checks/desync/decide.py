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
from enum import StrEnum

from opsd.observe.results import AHEAD_OF_QUEUE, DesyncState, QueueDesync


class HealOutcome(StrEnum):
    """What became of a heal: the `outcome` label of the heals counter."""

    HEALED = "healed"
    NOTHING_TO_HEAL = "nothing_to_heal"
    NO_COMMITTED_BATCH = "refused_no_committed_batch"
    MISMATCH = "refused_checkpoint_mismatch"
    AHEAD_OF_QUEUE = "refused_ahead_of_queue"
    BEHIND_TRIM = "refused_behind_trim"
    CONSUMER_AHEAD = "refused_consumer_ahead"
    BATCH_RUNNING = "refused_batch_running"
    QUERY_BUSY = "refused_query_busy"
    CONFLICT = "conflict"
    FAILED = "failed"

    @property
    def words(self) -> str:
        """The outcome for people (`opsd desync heal`); metrics, logs and `/status` keep the value."""
        return HEAL_WORDS[self]


#: Each outcome in words.
HEAL_WORDS: Mapping[HealOutcome, str] = {
    HealOutcome.HEALED: "healed: the consumer moved to the committed batch's end",
    HealOutcome.NOTHING_TO_HEAL: "nothing to heal: the consumer is at the committed batch's end",
    HealOutcome.NO_COMMITTED_BATCH: "refused: the checkpoint has no committed batch yet",
    HealOutcome.MISMATCH: "refused: the checkpoint does not match this queue",
    HealOutcome.AHEAD_OF_QUEUE: "refused: the checkpoint or the consumer is past the queue's end",
    HealOutcome.BEHIND_TRIM: "refused: the checkpoint is behind the queue's trim",
    HealOutcome.CONSUMER_AHEAD: "refused: the consumer is ahead of the checkpoint (a heal never moves it back)",
    HealOutcome.BATCH_RUNNING: "waiting: a batch is running (planned, not committed)",
    HealOutcome.QUERY_BUSY: "waiting: the running query has rows to read; its next batch acknowledges this one",
    HealOutcome.CONFLICT: "conflict: another writer moved the consumer meanwhile",
    HealOutcome.FAILED: "failed: the consumer could not be advanced",
}


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
