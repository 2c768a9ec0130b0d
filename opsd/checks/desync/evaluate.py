"""Evaluate desync: one state per partition from the collected facts. Pure: no cluster, no clock.

States, in rising severity (a queue's state is its worst partition's):
- `in_sync`: the consumer is at the committed batch's end;
- `lagging_one_batch`: behind it, but not behind the previous batch's end — the source acknowledges a batch
  only when it plans the next one, so an idle query (and an `availableNow` run) leaves exactly this;
- `stuck`: behind the previous batch's end too: acknowledgements of two or more committed batches never
  reached the consumer while the query ran them;
- `consumer_ahead`: beyond the checkpoint's next row: a restart would skip the rows in between;
- `behind_trim`: the checkpoint's next row is trimmed: its next batch cannot be replayed;
- `consumer_ahead_of_queue`: the consumer is past the queue's last row (the queue was recreated under its path, or
  the consumer was moved by hand): rows written later below its offset would never be read;
- `checkpoint_ahead_of_queue`: the checkpoint's next row is past the queue's last row — the queue was recreated
  under the same path, or the checkpoint is another queue's of that path. Rows written later below the checkpoint's
  offset would be skipped. The counterpart of Burrow's REWIND (offsets that went back): here the queue went back
  under the offsets. Never healed (`opsd.checks.desync.decide`); the source fails such a batch
  (`streaming_core.cluster.BeyondQueueEndError`).

A queue's row count only grows while it lives, and the checkpoint and the consumer are read before the queue's
counters (`opsd.checks.desync.collect`), so the last two states never come from timing: offsets past the end are
offsets of another queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from opsd.checks.desync.facts import PartitionFacts, QueueFacts


class DesyncState(StrEnum):
    IN_SYNC = "in_sync"
    LAGGING_ONE_BATCH = "lagging_one_batch"
    STUCK = "stuck"
    CONSUMER_AHEAD = "consumer_ahead"
    BEHIND_TRIM = "behind_trim"
    CONSUMER_AHEAD_OF_QUEUE = "consumer_ahead_of_queue"
    CHECKPOINT_AHEAD_OF_QUEUE = "checkpoint_ahead_of_queue"


#: Every state, in rising severity (the metric's one-hot `state` label takes these values).
STATES: tuple[DesyncState, ...] = tuple(DesyncState)
#: States whose offsets lie past the queue's end: alerted, never healed.
AHEAD_OF_QUEUE = frozenset({DesyncState.CONSUMER_AHEAD_OF_QUEUE, DesyncState.CHECKPOINT_AHEAD_OF_QUEUE})


@dataclass(frozen=True)
class PartitionDesync:
    """A partition's state; `difference_rows` = checkpoint's next row - consumer offset (< 0: consumer ahead)."""

    facts: PartitionFacts
    state: DesyncState

    @property
    def difference_rows(self) -> int:
        return self.facts.checkpoint_next - self.facts.consumer_offset


@dataclass(frozen=True)
class QueueDesync:
    """A queue of a query with its partitions' states."""

    facts: QueueFacts
    partitions: tuple[PartitionDesync, ...]

    @property
    def state(self) -> DesyncState | None:
        """The worst partition's state; None when nothing could be judged (see `facts.problem`)."""
        return max(self.partitions, key=lambda p: STATES.index(p.state)).state if self.partitions else None

    @property
    def idle(self) -> bool:
        """Nothing is written past the checkpoint: the query has no next batch to plan."""
        return all(p.facts.row_count <= p.facts.checkpoint_next for p in self.partitions)


def partition_state(f: PartitionFacts) -> DesyncState:
    if f.checkpoint_next > f.row_count:
        return DesyncState.CHECKPOINT_AHEAD_OF_QUEUE
    if f.consumer_offset > f.row_count:
        return DesyncState.CONSUMER_AHEAD_OF_QUEUE
    if f.checkpoint_next < f.trimmed_row_count:
        return DesyncState.BEHIND_TRIM
    if f.consumer_offset > f.checkpoint_next:
        return DesyncState.CONSUMER_AHEAD
    if f.consumer_offset == f.checkpoint_next:
        return DesyncState.IN_SYNC
    if f.previous_next is not None and f.consumer_offset < f.previous_next:
        return DesyncState.STUCK
    return DesyncState.LAGGING_ONE_BATCH


def evaluate(facts: QueueFacts) -> QueueDesync:
    return QueueDesync(facts, tuple(PartitionDesync(p, partition_state(p)) for p in facts.partitions))
