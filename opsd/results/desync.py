"""The desync check's results (`opsd.checks.desync`): each partition's state between the checkpoint and the consumer,
a queue's partitions, and what became of a heal; `DesyncEntry` is what the status keeps per queue."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from opsd.results.positions import PartitionPositions, QueuePositions
from opsd.results.values import frozen_mapping, parsed


class DesyncState(StrEnum):
    IN_SYNC = "in_sync"
    LAGGING_ONE_BATCH = "lagging_one_batch"
    STUCK = "stuck"
    CONSUMER_AHEAD = "consumer_ahead"
    BEHIND_TRIM = "behind_trim"
    CONSUMER_AHEAD_OF_QUEUE = "consumer_ahead_of_queue"
    CHECKPOINT_AHEAD_OF_QUEUE = "checkpoint_ahead_of_queue"


    @property
    def words(self) -> str:
        """The state for people (`opsd doctor`, `opsd desync show`); JSON and metrics keep the value."""
        return DESYNC_WORDS[self]


#: Each state in words (see `opsd.checks.desync.evaluate` for what each means).
DESYNC_WORDS: Mapping[DesyncState, str] = {
    DesyncState.IN_SYNC: "in sync",
    DesyncState.LAGGING_ONE_BATCH: "one batch behind (late acknowledgement, harmless)",
    DesyncState.STUCK: "stuck: several batches not acknowledged",
    DesyncState.CONSUMER_AHEAD: "consumer ahead of the checkpoint: rows would be skipped",
    DesyncState.BEHIND_TRIM: "checkpoint behind the trim: its rows are gone",
    DesyncState.CONSUMER_AHEAD_OF_QUEUE: "consumer past the queue's end",
    DesyncState.CHECKPOINT_AHEAD_OF_QUEUE: "checkpoint past the queue's end",
}
#: Every state, in rising severity (the metric's one-hot `state` label takes these values).
STATES: tuple[DesyncState, ...] = tuple(DesyncState)
#: States whose offsets lie past the queue's end: alerted, never healed.
AHEAD_OF_QUEUE = frozenset({DesyncState.CONSUMER_AHEAD_OF_QUEUE, DesyncState.CHECKPOINT_AHEAD_OF_QUEUE})


@dataclass(frozen=True)
class PartitionDesync:
    """A partition's state; `difference_rows` = checkpoint's next row - consumer offset (< 0: consumer ahead)."""

    facts: PartitionPositions
    state: DesyncState

    @property
    def difference_rows(self) -> int:
        return self.facts.checkpoint_next - self.facts.consumer_offset

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], partition: int) -> PartitionDesync:
        """The inverse of `to_json` (the partition is its key in the queue's document)."""
        facts = PartitionPositions(partition, parsed(int, doc["checkpoint_next"]), None, None,
                                   parsed(int, doc["consumer_offset"]), parsed(int, doc["row_count"]),
                                   parsed(int, doc["trimmed_row_count"]), parsed(bool, doc.get("added", False)))
        return cls(facts, DesyncState(doc["state"]))

    def to_json(self) -> Mapping[str, Any]:
        f = self.facts
        return {"state": self.state, "difference_rows": self.difference_rows, "checkpoint_next": f.checkpoint_next,
                "consumer_offset": f.consumer_offset, "row_count": f.row_count,
                "trimmed_row_count": f.trimmed_row_count, "added": f.added}


@dataclass(frozen=True)
class QueueDesync:
    """A queue of a query with its partitions' states."""

    facts: QueuePositions
    partitions: tuple[PartitionDesync, ...]

    @property
    def state(self) -> DesyncState | None:
        """The worst partition's state; None when nothing could be judged (see `facts.problem`)."""
        return max(self.partitions, key=lambda p: STATES.index(p.state)).state if self.partitions else None

    @property
    def idle(self) -> bool:
        """Nothing is written past the checkpoint: the query has no next batch to plan."""
        return all(p.facts.row_count <= p.facts.checkpoint_next for p in self.partitions)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], query: str, queue: str) -> QueueDesync:
        """The inverse of `to_json` (the query and the queue name its entry in `/status`)."""
        partitions = tuple(PartitionDesync.from_json(p, int(n)) for n, p in (doc.get("partitions") or {}).items())
        facts = QueuePositions(query, queue, parsed(str, doc["consumer"]), parsed(str, doc["source"]),
                               parsed(int | None, doc.get("committed_batch")),
                               parsed(int | None, doc.get("planned_batch")), tuple(p.facts for p in partitions),
                               problem=parsed(str | None, doc.get("problem")),
                               removed_partitions=parsed(tuple[int, ...], doc.get("removed_partitions") or []),
                               vital=parsed(bool | None, doc.get("vital")))
        return cls(facts, partitions)

    def to_json(self) -> Mapping[str, Any]:
        f = self.facts
        return {"consumer": f.consumer, "vital": f.vital, "source": f.source, "state": self.state,
                "committed_batch": f.committed_batch, "planned_batch": f.planned_batch, "problem": f.problem,
                "removed_partitions": f.removed_partitions,
                "partitions": {p.facts.partition: p for p in self.partitions}}


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
class Heal:
    """A heal of a queue's consumer (`opsd.checks.desync`): its outcome, when, and the moves made,
    `{partition: (old, new)}`."""

    outcome: HealOutcome
    at: float
    moves: Mapping[int, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "moves", frozen_mapping(self.moves))

    def to_json(self) -> Mapping[str, Any]:
        return {"outcome": self.outcome, "at": self.at, "moves": self.moves}


@dataclass(frozen=True)
class DesyncEntry:
    """What the status keeps per queue: the latest desync (None before the first) and the last heal."""

    desync: QueueDesync | None = None
    last_heal: Heal | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], query: str, queue: str) -> DesyncEntry:
        """The inverse of `to_json`: the desync where the document has one, and the last heal."""
        desync = QueueDesync.from_json(doc, query, queue) if "consumer" in doc else None
        return cls(desync, parsed(Heal | None, doc.get("last_heal")))

    def to_json(self) -> Mapping[str, Any]:
        return {**(self.desync.to_json() if self.desync else {}), "last_heal": self.last_heal}
