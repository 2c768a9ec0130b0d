"""What the vital-consumer audit evaluates, as plain data: per queue read and consumer vital for it, its offsets in
the partitions it is vital for, the queue's row counts there, and the queries that read the queue (with their
consumers)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from opsd.results.positions import same_consumer


@dataclass(frozen=True)
class VitalFacts:
    queue: str
    consumer: str
    at: float
    offsets: Mapping[int, int]
    row_counts: Mapping[int, int]
    #: `{query: its consumer}` of the queries reading the queue.
    readers: Mapping[str, str] = field(default_factory=dict)

    def own(self, query: str) -> bool:
        """Whether the consumer is the one `query` reads the queue with (its own), not another job's."""
        return same_consumer(self.readers[query], self.consumer)

    @property
    def waiting_rows(self) -> int:
        """Rows written past the consumer's offsets (an offset read after the counters may be past them: 0 there)."""
        return sum(max(0, self.row_counts.get(p, 0) - offset) for p, offset in self.offsets.items())
