"""Evaluate desync: one state per partition from the collected facts. Pure: no cluster, no clock.

States (`opsd.results.desync.DesyncState`), in rising severity (a queue's state is its worst partition's):
- `in_sync`: the consumer is at the committed batch's end;
- `lagging_one_batch`: behind it, but not behind the previous batch's end — the source acknowledges a batch
  only when it plans the next one, so an idle query (and an `availableNow` run) leaves exactly this;
- `stuck`: behind the previous batch's end too: acknowledgements of two or more committed batches never
  reached the consumer while the query ran them;
- `consumer_ahead`: beyond the checkpoint's next row and beyond the trim: a restart would skip the rows in between
  that are still there (a consumer moved to the trim past a checkpoint behind it skips nothing that exists: the
  query's next row is the consumer's, the source's rule, so that is `in_sync`);
- `behind_trim`: the query's next row (the checkpoint's, or the consumer's when further) is trimmed: its next batch
  cannot be read (`TrimmedRowsError`) until the consumer is moved to the trim (`opsd consumer seek --to trim`);
- `consumer_ahead_of_queue`: the consumer is past the queue's last row (the queue was recreated under its path, or
  the consumer was moved by hand): rows written later below its offset would never be read;
- `checkpoint_ahead_of_queue`: the checkpoint's next row is past the queue's last row — the queue was recreated
  under the same path, or the checkpoint is another queue's of that path. Rows written later below the checkpoint's
  offset would be skipped. The counterpart of Burrow's REWIND (offsets that went back): here the queue went back
  under the offsets. Never healed (`opsd.checks.desync.decide`); the source fails such a batch
  (`streaming_core.cluster.BeyondQueueEndError`).

A queue's row count only grows while it lives, and the checkpoint and the consumer are read before the queue's
counters (`opsd.collect.positions`), so the last two states never come from timing: offsets past the end are
offsets of another queue.
"""

from __future__ import annotations

from opsd.results.desync import DesyncState, PartitionDesync, QueueDesync
from opsd.results.positions import PartitionPositions, QueuePositions


def partition_state(f: PartitionPositions) -> DesyncState:
    if f.checkpoint_next > f.row_count:
        return DesyncState.CHECKPOINT_AHEAD_OF_QUEUE
    if f.consumer_offset > f.row_count:
        return DesyncState.CONSUMER_AHEAD_OF_QUEUE
    if f.next_row < f.trimmed_row_count:
        return DesyncState.BEHIND_TRIM
    if f.consumer_offset > max(f.checkpoint_next, f.trimmed_row_count):
        return DesyncState.CONSUMER_AHEAD
    if f.consumer_offset >= f.checkpoint_next:
        return DesyncState.IN_SYNC
    if f.previous_next is not None and f.consumer_offset < f.previous_next:
        return DesyncState.STUCK
    return DesyncState.LAGGING_ONE_BATCH


def evaluate(facts: QueuePositions) -> QueueDesync:
    return QueueDesync(facts, tuple(PartitionDesync(p, partition_state(p)) for p in facts.partitions))
