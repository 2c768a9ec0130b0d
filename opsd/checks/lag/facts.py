"""What the lag check samples, as plain data: per query and partition the next row to read and the queue's
counters at one instant, and the `$timestamp` of that next row where the queue has the column."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionSample:
    queue: str
    partition: int
    next_row: int
    row_count: int
    trimmed_row_count: int
    #: Unix seconds at which the next row to read was written (`$timestamp`); None when unknown.
    next_row_written_at: float | None = None


@dataclass(frozen=True)
class QuerySample:
    """One query at time `at` (unix seconds)."""

    query: str
    at: float
    partitions: tuple[PartitionSample, ...]


@dataclass(frozen=True)
class Point:
    """A sample as the history keeps it: row counts per (queue, partition) and the query's totals."""

    at: float
    row_counts: Mapping[tuple[str, int], int]
    rows_written: int
    rows_read: int

    @classmethod
    def of(cls, sample: QuerySample) -> Point:
        return cls(sample.at, {(p.queue, p.partition): p.row_count for p in sample.partitions},
                   sum(p.row_count for p in sample.partitions), sum(p.next_row for p in sample.partitions))
