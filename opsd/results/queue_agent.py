"""The Queue Agent check's result (`opsd.checks.queue_agent`): a query's queue and consumer as YTsaurus' Queue
Agent (or opsd's own measurements) sees them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from opsd.results.values import parsed_fields


class Disposition(StrEnum):
    """Where a consumer's offset stands in a partition's window of rows, as YTsaurus' Queue Agent names it."""

    UP_TO_DATE = "up_to_date"
    PENDING_CONSUMPTION = "pending_consumption"
    EXPIRED = "expired"
    AHEAD = "ahead"


@dataclass(frozen=True)
class PartitionSignals:
    """One partition of a query's queue as its consumer sees it: rows written per second, rows the consumer has not
    read, its disposition and its processing lag (the age of its next row); None where neither the Queue Agent nor
    opsd's own measurements tell."""

    partition: int
    write_rows_per_second: float | None
    unread_rows: int | None
    disposition: Disposition | None
    processing_lag_seconds: float | None


@dataclass(frozen=True)
class QueueSignals:
    """A query's queue and consumer: the Queue Agent's signals where it serves them (`served`), else opsd's own
    measurements (the queue's row counts between two readings, the consumer's offset, the lag check's lag)."""

    query: str
    queue: str
    consumer: str
    served: bool
    write_rows_per_second: float | None
    partitions: tuple[PartitionSignals, ...] = ()

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], query: str, queue: str) -> QueueSignals:
        """The inverse of `to_json` (the query and the queue name its entry in `/status`)."""
        partitions = tuple(parsed_fields(PartitionSignals, p, partition=int(n))
                           for n, p in (doc.get("partitions") or {}).items())
        return parsed_fields(cls, doc, query=query, queue=queue, partitions=partitions)

    def to_json(self) -> Mapping[str, Any]:
        return {"consumer": self.consumer, "served": self.served, "write_rows_per_second": self.write_rows_per_second,
                "partitions": {p.partition: {"write_rows_per_second": p.write_rows_per_second,
                                             "unread_rows": p.unread_rows, "disposition": p.disposition,
                                             "processing_lag_seconds": p.processing_lag_seconds}
                               for p in self.partitions}}
