"""Evaluate lag: unread rows and lag in seconds per partition, smoothed rates and time to drain per query. Pure: the
time is a parameter, the history a tuple of past samples.

- unread rows: the queue's end minus the next row to read (`streaming_core.offsets.unread_rows`);
- lag seconds: 0 when nothing is unread (also on an idle queue — kafka-lag-exporter's known bug is to report the
  idle time there); else the age of the next row to read: from its `$timestamp`, else from the sampled history of
  the partition's row count, interpolated between the two samples around the row (older than the history: at
  least the history's age);
- time to drain: backlog / (processing rate - input rate), both averaged over the window; +Inf when the query is
  not draining, 0 with no backlog.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from opsd.checks.lag.facts import PartitionSample, Point, QuerySample
from opsd.results.lag import PartitionLag, QueryLag
from streaming_core.offsets import unread_rows


def row_written_at(row: int, key: tuple[str, int], points: Sequence[Point]) -> float | None:
    """When row `row` of partition `key` was written, from the points (oldest first); None with no points."""
    if not points:
        return None
    i = bisect.bisect_right(points, row, key=lambda point: point.row_counts.get(key, 0))
    if i == 0:  # older than the history: at least as old as it (unknown while the history is only this sample)
        return points[0].at if len(points) > 1 else None
    if i == len(points):
        return None
    before, after = points[i - 1], points[i]
    count_before, count_after = before.row_counts.get(key, 0), after.row_counts[key]
    return before.at + (after.at - before.at) * (row - count_before + 1) / (count_after - count_before)


def partition_lag(sample: PartitionSample, now: float, points: Sequence[Point]) -> PartitionLag:
    unread = unread_rows(sample.next_row, sample.row_count, sample.trimmed_row_count)
    if unread == 0:
        return PartitionLag(sample.queue, sample.partition, 0, 0.0)
    next_row = max(sample.next_row, sample.trimmed_row_count)
    written = sample.next_row_written_at if sample.next_row_written_at is not None \
        else row_written_at(next_row, (sample.queue, sample.partition), points)
    return PartitionLag(sample.queue, sample.partition, unread, None if written is None else max(0.0, now - written))


def rates(window: Sequence[Point]) -> tuple[float | None, float | None]:
    """(input, processed) rows per second between the window's first and last points."""
    if len(window) < 2 or window[-1].at <= window[0].at:
        return None, None
    elapsed = window[-1].at - window[0].at
    written = window[-1].rows_written - window[0].rows_written
    read = window[-1].rows_read - window[0].rows_read
    return max(0.0, written / elapsed), max(0.0, read / elapsed)


def evaluate(sample: QuerySample, history: Sequence[Point], window_seconds: float) -> QueryLag:
    """The query's lag at `sample.at`; `history` holds its earlier points, oldest first."""
    points = [*[h for h in history if h.at < sample.at], Point.of(sample)]
    partitions = tuple(partition_lag(p, sample.at, points) for p in sample.partitions)
    window = [p for p in points if p.at >= sample.at - window_seconds]
    input_rate, processed_rate = rates(window)
    return QueryLag(sample.query, partitions, input_rate, processed_rate)
