"""What the desync check collects, as plain data: per query and queue, the checkpoint's batches, the consumer and
the queue's counters, in next-row terms (a checkpoint's last-read index + 1, as a consumer offset is)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionFacts:
    """One partition. `previous_next` is the end of the batch before the committed one (None when unknown),
    `planned_next` the end of a planned batch not committed yet (None when there is none)."""

    partition: int
    checkpoint_next: int
    previous_next: int | None
    planned_next: int | None
    consumer_offset: int
    row_count: int
    trimmed_row_count: int


@dataclass(frozen=True)
class QueueFacts:
    """One queue of one query, where its facts came from (`checkpoint` location or `progress`), and any problem
    that makes its partitions unknowable (`problem`, with `partitions` empty)."""

    query: str
    queue: str
    consumer: str
    source: str
    committed_batch: int | None
    planned_batch: int | None
    partitions: tuple[PartitionFacts, ...] = ()
    query_stopped: bool = False
    problem: str | None = None
