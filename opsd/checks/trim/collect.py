"""Collect the trim forecast's facts from the cycle's positions reading (`opsd.collect.positions`: the queries' next
rows and the queues' counters, and per queue its `@auto_trim_config` and vital consumers' offsets) and from the lag
check's result in the status store (the age of each partition's next row). Reads nothing more from the cluster."""

from __future__ import annotations

from collections.abc import Callable

from opsd.checks.trim.facts import PartitionTrimFacts, QueueTrimFacts
from opsd.collect.positions import Reading
from opsd.results.lag import QueryLag
from opsd.results.positions import QueueRetention, same_consumer


def collect(reading: Reading, lag_of: Callable[[str], QueryLag | None]) -> list[QueueTrimFacts]:
    """One `QueueTrimFacts` per query and queue of the reading."""
    found = []
    for q in reading.queues:
        retention = reading.retention.get(q.queue)
        problem = q.problem or (retention.problem if retention else None)
        if problem or retention is None:
            found.append(QueueTrimFacts(q.query, q.queue, q.consumer, reading.at, None,
                                        problem=problem or f"{q.queue}: its retention was not read"))
            continue
        lag = lag_of(q.query)
        ages = {(p.queue, p.partition): p.lag_seconds for p in lag.partitions} if lag else {}
        parts = tuple(_partition(retention, q.consumer, p.partition, p.next_row, p.row_count, p.trimmed_row_count,
                                 ages.get((q.queue, p.partition))) for p in q.partitions)
        found.append(QueueTrimFacts(q.query, q.queue, q.consumer, reading.at, retention.auto_trim, parts,
                                    automatic_trimming=retention.automatic_trimming))
    return found


def _partition(retention: QueueRetention, consumer: str, partition: int, next_row: int, row_count: int,
               trimmed: int, lag_seconds: float | None) -> PartitionTrimFacts:
    vital = retention.vital_offsets(partition)
    own = any(same_consumer(consumer, c) for c in vital)
    return PartitionTrimFacts(partition, next_row, row_count, trimmed, min(vital.values()) if vital else None,
                              own, lag_seconds)
