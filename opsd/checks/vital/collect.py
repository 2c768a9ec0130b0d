"""Collect the vital-consumer audit's facts from the cycle's positions reading: per queue its vital consumers'
offsets (`QueueRetention`) and its row counts from the queries reading it. Reads nothing more from the cluster."""

from __future__ import annotations

from opsd.checks.vital.facts import VitalFacts
from opsd.collect.positions import Reading


def collect(reading: Reading) -> list[VitalFacts]:
    """One `VitalFacts` per queue read and consumer vital for it, in the reading's order."""
    row_counts: dict[str, dict[int, int]] = {}
    readers: dict[str, dict[str, str]] = {}
    for q in reading.queues:
        if q.partitions:
            counts = row_counts.setdefault(q.queue, {})
            for p in q.partitions:
                counts[p.partition] = max(counts.get(p.partition, 0), p.row_count)
            readers.setdefault(q.queue, {})[q.query] = q.consumer
    found = []
    for queue, retention in reading.retention.items():
        counts = row_counts.get(queue, {})
        for vital in retention.vital:
            offsets = {p: offset for p in sorted(counts) if (offset := vital.offset(p)) is not None}
            found.append(VitalFacts(queue, vital.consumer, reading.at, offsets, counts, readers.get(queue, {})))
    return found
