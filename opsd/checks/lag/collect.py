"""Collect lag samples: per query the next row to read of each partition — the committed checkpoint's end, or the
consumer's offset when that is further (the source's own rule) — from the desync check's facts, and the
`$timestamp` of that row where the queue has the column.

`$timestamp` is read as YTsaurus writes it (a hybrid timestamp, unix seconds in the bits above 30) and as the
embedded cluster writes it (microseconds since the epoch); the two are told apart by magnitude.
"""

from __future__ import annotations

from collections.abc import Iterable

from opsd.checks.desync.facts import QueueFacts
from opsd.checks.lag.facts import PartitionSample, QuerySample
from streaming_core.cluster import Cluster, ClusterError
from streaming_core.cluster.schema import TIMESTAMP

#: Hybrid YTsaurus timestamps are above this (2**30 x unix seconds); microseconds since 1970 stay far below it.
_HYBRID_TIMESTAMP_FLOOR = 1 << 55


def timestamp_seconds(value: int) -> float:
    """A `$timestamp` value as unix seconds (see the module docstring)."""
    return float(value >> 30) if value >= _HYBRID_TIMESTAMP_FLOOR else value / 1e6


def written_at(cluster: Cluster, queue: str, partition: int, row: int) -> float | None:
    """The `$timestamp` of one row, None when it is gone or not there."""
    try:
        for batch in cluster.read_tablet(queue, partition, row, row + 1, columns=[TIMESTAMP]):
            if batch.num_rows:
                return timestamp_seconds(batch.column(0)[0].as_py())
    except ClusterError:
        return None
    return None


def collect(cluster: Cluster, facts: Iterable[QueueFacts], at: float) -> list[QuerySample]:
    """One sample per query at time `at`, over all its queues."""
    by_query: dict[str, list[PartitionSample]] = {}
    stamped: dict[str, bool] = {}
    for f in facts:
        if f.queue not in stamped and f.partitions:
            stamped[f.queue] = TIMESTAMP in cluster.get_schema(f.queue).names
        parts = by_query.setdefault(f.query, [])
        for p in f.partitions:
            next_row = max(p.checkpoint_next, p.consumer_offset)
            first_unread = max(next_row, p.trimmed_row_count)
            stamp = written_at(cluster, f.queue, p.partition, first_unread) \
                if first_unread < p.row_count and stamped[f.queue] else None
            parts.append(PartitionSample(f.queue, p.partition, next_row, p.row_count, p.trimmed_row_count, stamp))
    return [QuerySample(query, at, tuple(parts)) for query, parts in by_query.items()]
