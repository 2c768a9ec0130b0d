"""Collect lag samples: per query the next row to read of each partition — the committed checkpoint's end, or the
consumer's offset when that is further (the source's own rule) — from the cycle's positions
(`opsd.collect.positions`), and the `$timestamp` of that row where the queue has the column.

A row's `$timestamp` costs one read, so `Timestamps` remembers it while the row stays a partition's next one and
reads at most a budget of new ones per run; the partitions past the budget get their lag from the sampled history
(`opsd.checks.lag.evaluate`) until a later run reads them.

`$timestamp` is read as YTsaurus writes it (a hybrid timestamp, unix seconds in the bits above 30) and as the
embedded cluster writes it (microseconds since the epoch); the two are told apart by magnitude.
"""

from __future__ import annotations

from collections.abc import Iterable

from opsd.checks.lag.facts import PartitionSample, QuerySample
from opsd.results.positions import QueuePositions
from streaming_core.cluster import Cluster, ClusterError
from streaming_core.cluster.schema import TIMESTAMP

#: Hybrid YTsaurus timestamps are above this (2**30 x unix seconds); microseconds since 1970 stay far below it.
_HYBRID_TIMESTAMP_FLOOR = 1 << 55


def timestamp_seconds(value: int) -> float:
    """A `$timestamp` value as unix seconds (see the module docstring)."""
    return float(value >> 30) if value >= _HYBRID_TIMESTAMP_FLOOR else value / 1e6


def written_at(cluster: Cluster, queue: str, partition: int, row: int, row_count: int) -> float | None:
    """The `$timestamp` of the first row still kept from `row` on (below `row_count`: a Queue Agent may have trimmed
    `row` since the counters were read, and then the first row kept is the one the query reads next), None when no
    row is there."""
    try:
        for batch in cluster.read_kept(queue, partition, row, row_count, columns=[TIMESTAMP], max_rows=1):
            if batch.num_rows:
                return timestamp_seconds(batch.column(0)[0].as_py())
    except ClusterError:
        return None
    return None


class Timestamps:
    """The `$timestamp` of each partition's next row to read, kept while that row stays the next one (a read that
    found none is not kept)."""

    #: New rows' timestamps read per run at most.
    BUDGET = 256

    def __init__(self, budget: int = BUDGET) -> None:
        self.budget = budget
        self._known: dict[tuple[str, int], tuple[int, float]] = {}
        self._left = budget

    def start_run(self) -> None:
        self._left = self.budget

    def of(self, cluster: Cluster, queue: str, partition: int, row: int, row_count: int) -> float | None:
        known = self._known.get((queue, partition))
        if known is not None and known[0] == row:
            return known[1]
        if self._left <= 0:
            return None
        self._left -= 1
        stamp = written_at(cluster, queue, partition, row, row_count)
        if stamp is not None:  # a read that failed is tried again at the next run, not remembered as no timestamp
            self._known[(queue, partition)] = (row, stamp)
        return stamp


def collect(cluster: Cluster | None, queues: Iterable[QueuePositions], at: float,
            timestamps: Timestamps | None = None) -> list[QuerySample]:
    """One sample per query at time `at`, over all its queues; `cluster` reads the `$timestamp`s of queues that have
    it (None when none has: nothing more is read)."""
    timestamps = timestamps or Timestamps()
    timestamps.start_run()
    by_query: dict[str, list[PartitionSample]] = {}
    for f in queues:
        parts = by_query.setdefault(f.query, [])
        for p in f.partitions:
            first_unread = max(p.next_row, p.trimmed_row_count)
            stamp = timestamps.of(cluster, f.queue, p.partition, first_unread, p.row_count) \
                if cluster is not None and first_unread < p.row_count and f.timestamped else None
            parts.append(PartitionSample(f.queue, p.partition, p.next_row, p.row_count, p.trimmed_row_count, stamp))
    return [QuerySample(query, at, tuple(parts)) for query, parts in by_query.items()]
