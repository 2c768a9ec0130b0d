"""Evaluate desync: one state per partition from the collected facts. Pure: no cluster, no clock.

States, in rising severity (a queue's state is its worst partition's):
- `in_sync`: the consumer is at the committed batch's end;
- `lagging_one_batch`: behind it, but not behind the previous batch's end — the source acknowledges a batch
  only when it plans the next one, so an idle query (and an `availableNow` run) leaves exactly this;
- `stuck`: behind the previous batch's end too: acknowledgements of two or more committed batches never
  reached the consumer while the query ran them;
- `consumer_ahead`: beyond the checkpoint's next row: a restart would skip the rows in between;
- `behind_trim`: the checkpoint's next row is trimmed: its next batch cannot be replayed.
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


#: Every state, in rising severity (the metric's one-hot `state` label takes these values).
STATES: tuple[DesyncState, ...] = tuple(DesyncState)


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
